// Output files written all or nothing, and input files read only when they are regular files and
// only as far as their format allows.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "common/input_file.h"
#include "common/staged_files.h"

namespace diffattn {
namespace {

namespace fs = std::filesystem;

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string random_text(std::mt19937& rng, std::size_t size) {
  std::string text(size, '\0');
  std::uniform_int_distribution<int> byte(0, 255);
  for (char& c : text) c = static_cast<char>(byte(rng));
  return text;
}

class StagedFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("diffattn_staged_" + std::to_string(std::random_device{}()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name, std::ios::binary) << text; }
  std::size_t entries() const { return static_cast<std::size_t>(std::distance(fs::directory_iterator(dir_), {})); }

  fs::path dir_;
  std::mt19937 rng_{std::random_device{}()};
};

TEST_F(StagedFilesTest, CommitReplacesEveryFileAndLeavesNoTemporary) {
  const std::string old_a = random_text(rng_, 100), a1 = random_text(rng_, 3000), a2 = random_text(rng_, 17),
                    b = random_text(rng_, 5000);
  write("a.bin", old_a);
  StagedFiles files;
  ASSERT_TRUE(files.stage(path("a.bin"), {a1, a2}).ok());
  ASSERT_TRUE(files.stage(path("b.bin"), {b}).ok());
  EXPECT_EQ(read_bytes(dir_ / "a.bin"), old_a) << "nothing changes before commit";
  EXPECT_FALSE(fs::exists(dir_ / "b.bin"));
  ASSERT_TRUE(files.commit().ok());
  EXPECT_EQ(read_bytes(dir_ / "a.bin"), a1 + a2);
  EXPECT_EQ(read_bytes(dir_ / "b.bin"), b);
  EXPECT_EQ(entries(), 2u);
}

TEST_F(StagedFilesTest, AFailedMoveRestoresEveryFileAsItWas) {
  const std::string old_a = random_text(rng_, 256), old_c = random_text(rng_, 64);
  write("a.bin", old_a);
  write("c.bin", old_c);
  fs::create_directories(dir_ / "sub");
  {
    StagedFiles files;
    ASSERT_TRUE(files.stage(path("a.bin"), {random_text(rng_, 512)}).ok());
    ASSERT_TRUE(files.stage(path("new.bin"), {random_text(rng_, 32)}).ok());
    ASSERT_TRUE(files.stage(path("c.bin"), {random_text(rng_, 32)}).ok());
    ASSERT_TRUE(files.stage(path("sub/b.bin"), {random_text(rng_, 512)}).ok());
    // The last file's folder disappears after staging: its move fails after the others were made.
    fs::remove_all(dir_ / "sub");
    const Status committed = files.commit();
    ASSERT_FALSE(committed.ok());
    EXPECT_NE(committed.message().find("b.bin"), std::string::npos) << committed.message();
  }
  EXPECT_EQ(read_bytes(dir_ / "a.bin"), old_a);
  EXPECT_EQ(read_bytes(dir_ / "c.bin"), old_c);
  EXPECT_FALSE(fs::exists(dir_ / "new.bin"));
  EXPECT_EQ(entries(), 2u) << "a.bin and c.bin; no temporary or backup left";
}

TEST_F(StagedFilesTest, ATargetThatBecameAFolderIsNotReplaced) {
  write("a.bin", "before");
  {
    StagedFiles files;
    ASSERT_TRUE(files.stage(path("a.bin"), {random_text(rng_, 512)}).ok());
    ASSERT_TRUE(files.stage(path("b.bin"), {random_text(rng_, 512)}).ok());
    fs::create_directories(dir_ / "b.bin" / "inside");
    EXPECT_FALSE(files.commit().ok());
  }
  EXPECT_EQ(read_bytes(dir_ / "a.bin"), "before");
  EXPECT_TRUE(fs::is_directory(dir_ / "b.bin" / "inside"));
  EXPECT_EQ(entries(), 2u);
}

TEST_F(StagedFilesTest, UncommittedFilesLeaveNothingBehind) {
  write("a.bin", "before");
  {
    StagedFiles files;
    ASSERT_TRUE(files.stage(path("a.bin"), {random_text(rng_, 100)}).ok());
    ASSERT_TRUE(files.stage(path("b.bin"), {random_text(rng_, 100)}).ok());
    EXPECT_FALSE(files.stage(path("missing/c.bin"), {"x"}).ok());
  }
  EXPECT_EQ(read_bytes(dir_ / "a.bin"), "before");
  EXPECT_EQ(entries(), 1u);
}

TEST_F(StagedFilesTest, FoldersAndDevicesAreNotReplaced) {
  fs::create_directories(dir_ / "folder");
  StagedFiles files;
  EXPECT_FALSE(files.stage(path("folder"), {"x"}).ok());
  EXPECT_FALSE(files.stage("/dev/null", {"x"}).ok());
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
}

TEST_F(StagedFilesTest, FolderWritableCheckLooksAtTheNearestExistingFolder) {
  EXPECT_TRUE(check_folder_writable(path("not/yet/made"), "--out-dir").ok());
  EXPECT_FALSE(fs::exists(dir_ / "not")) << "the check creates nothing";
  write("file", "x");
  const Status under_file = check_folder_writable(path("file/sub"), "--out-dir");
  EXPECT_FALSE(under_file.ok());
  EXPECT_NE(under_file.message().find("is not a folder"), std::string::npos) << under_file.message();
  EXPECT_FALSE(check_folder_writable("/proc/diffattn_probe", "--out-dir").ok());
  EXPECT_EQ(entries(), 1u);
}

TEST_F(StagedFilesTest, InputFilesAreRegularFilesReadExactly) {
  const std::string text = random_text(rng_, 777);
  write("in.bin", text);
  auto file = InputFile::open(path("in.bin"));
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ(file->size(), text.size());
  std::string middle(100, '\0');
  ASSERT_TRUE(file->read_at(300, middle.data(), middle.size()).ok());
  EXPECT_EQ(middle, text.substr(300, 100));
  EXPECT_FALSE(file->read_at(700, middle.data(), middle.size()).ok()) << "reading past the end is an error";

  fs::create_directories(dir_ / "folder");
  ASSERT_EQ(::mkfifo(path("pipe").c_str(), 0600), 0);
  for (const auto& [p, kind] : {std::pair{path("folder"), "a folder"}, std::pair{std::string("/dev/zero"), "a character device"},
                                std::pair{path("pipe"), "a pipe"}}) {
    auto refused = InputFile::open(p);
    ASSERT_FALSE(refused.ok()) << p;
    EXPECT_NE(refused.status().message().find(p + " is " + kind), std::string::npos) << refused.status().message();
  }
  EXPECT_FALSE(InputFile::open(path("missing")).ok());
}

TEST_F(StagedFilesTest, SmallFilesAreReadOnlyUpToTheirLimit) {
  const std::string text = random_text(rng_, 1000);
  write("small", text);
  auto whole = read_small_file(path("small"), 1000, "test file");
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(*whole, text);
  auto refused = read_small_file(path("small"), 999, "test file");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("a test file is at most 999 bytes"), std::string::npos)
      << refused.status().message();
}

}  // namespace
}  // namespace diffattn
