// Bad inputs of the kind a hostile tester tries, run through the real `diffattn` binary: bytes that
// are not UTF-8 under --json, folders, devices, pipes and oversized or lying files as inputs, and
// outputs that would overwrite an input or land where they cannot be written. Every row must exit
// with its code and message, and leave every file that existed before exactly as it was.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_runner.h"
#include "common/npy.h"

namespace diffattn {
namespace {

namespace fs = std::filesystem;
using testing::CliResult;
using testing::run_cli;

struct Row {
  std::string name;
  std::vector<std::string> args;  // "{d}" stands for the row's folder
  int exit_code;
  std::string message;  // a fragment of stderr
  bool json = false;    // --json is passed: stdout must be one JSON document (an error unless exit 0);
                        // without it, a refused command prints nothing on stdout
};

// The bytes and modification time of a file, to prove it untouched.
struct Snapshot {
  std::string bytes;
  fs::file_time_type mtime;
  bool operator==(const Snapshot&) const = default;
};

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Every entry under `dir`; regular files with their content.
std::map<std::string, Snapshot> snapshot(const fs::path& dir) {
  std::map<std::string, Snapshot> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    Snapshot s;
    if (entry.is_regular_file()) {
      s.bytes = read_bytes(entry.path());
      s.mtime = fs::last_write_time(entry.path());
    }
    files[fs::relative(entry.path(), dir).string()] = s;
  }
  return files;
}

// A .npy header (format 1 or 2) followed by `data`, written by hand so that it may lie.
std::string npy_image(const std::string& header_dict, const std::string& data, int version = 1,
                      std::uint32_t claimed_length = 0) {
  std::string header = header_dict;
  const std::size_t prefix = version == 1 ? 10 : 12;
  header.append((64 - (prefix + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  const std::uint32_t length = claimed_length ? claimed_length : static_cast<std::uint32_t>(header.size());
  std::string image = "\x93NUMPY";
  image += static_cast<char>(version);
  image += '\0';
  for (std::size_t i = 0; i < (version == 1 ? 2u : 4u); ++i) image += static_cast<char>((length >> (8 * i)) & 0xff);
  return image + header + data;
}

class BadInputFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("diffattn_bad_files_" + std::to_string(std::random_device{}()));
    fs::create_directories(dir_ / "folder");
    std::mt19937 rng(std::random_device{}());
    write_random("q.npy", {1, 8, 2, 16}, rng);
    write_random("k.npy", {1, 8, 2, 16}, rng);
    write_random("v.npy", {1, 8, 2, 16}, rng);
    write_random("existing_out.npy", {1, 8, 2, 16}, rng);
    write_random("existing_lse.npy", {1, 2, 8}, rng);
    fs::create_symlink(dir_ / "q.npy", dir_ / "q_link.npy");
    ASSERT_EQ(::mkfifo((dir_ / "pipe.npy").c_str(), 0600), 0);
    // A platform description far larger than any real one: spaces around an empty object.
    write_text("huge_platform.json", std::string(2 << 20, ' ') + "{}");
    // Headers that claim more than the file holds.
    write_text("lying_shape.npy", npy_image("{'descr': '<f4', 'fortran_order': False, 'shape': (100000, 100000, 64), }",
                                            std::string(64, '\0')));
    write_text("lying_header.npy", npy_image("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
                                             std::string(8, '\0'), 2, 0xfffffff0u));
    write_text("binary_header.npy", npy_image("{'descr': '<f4\xff\xfe', 'fortran_order': False, 'shape': (2,), }",
                                              std::string(8, '\0')));
    // An activation dump for tiny-dit's self role whose q claims far more data than it holds.
    fs::create_directories(dir_ / "acts" / "self");
    fs::copy_file(dir_ / "lying_shape.npy", dir_ / "acts" / "self" / "q.npy");
    fs::copy_file(dir_ / "k.npy", dir_ / "acts" / "self" / "k.npy");
    fs::copy_file(dir_ / "v.npy", dir_ / "acts" / "self" / "v.npy");
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write_random(const std::string& name, std::vector<std::int64_t> shape, std::mt19937& rng) {
    npy::Array a;
    a.shape = std::move(shape);
    std::vector<float> values(static_cast<std::size_t>(a.numel()));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (float& v : values) v = normal(rng);
    const auto* bytes = reinterpret_cast<const std::byte*>(values.data());
    a.data.assign(bytes, bytes + values.size() * sizeof(float));
    ASSERT_TRUE(npy::write_file((dir_ / name).string(), a).ok());
  }
  void write_text(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
  }

  std::vector<std::string> expand(const std::vector<std::string>& args) const {
    std::vector<std::string> out;
    for (std::string a : args) {
      for (auto at = a.find("{d}"); at != std::string::npos; at = a.find("{d}")) a.replace(at, 3, dir_.string());
      out.push_back(a);
    }
    return out;
  }

  void check(const Row& row) {
    SCOPED_TRACE(row.name);
    const auto before = snapshot(dir_);
    const CliResult r = run_cli(expand(row.args));
    EXPECT_EQ(r.exit_code, row.exit_code) << "stderr: " << r.err << "\nstdout: " << r.out;
    EXPECT_NE(r.err.find(row.message), std::string::npos) << "stderr: " << r.err;
    if (row.json) {
      const nlohmann::json doc = r.json();
      ASSERT_TRUE(doc.is_object()) << "stdout is not JSON: " << r.out;
      EXPECT_EQ(doc.contains("error"), row.exit_code != 0) << r.out;
    } else {
      EXPECT_EQ(r.out, "") << "a refused command started its work";
    }
    EXPECT_TRUE(snapshot(dir_) == before) << "files under " << dir_ << " changed, or a file was left behind";
  }

  fs::path dir_;
};

// attend with inputs q, k, v from the row's folder, then `extra`.
std::vector<std::string> attend(std::vector<std::string> extra) {
  std::vector<std::string> args = {"attend", "--platform", "cpu", "--q", "{d}/q.npy", "--k", "{d}/k.npy",
                                   "--v", "{d}/v.npy"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// attend with `flag` replaced by `path` and everything else valid.
std::vector<std::string> attend_with(const std::string& flag, const std::string& path) {
  std::vector<std::string> args = {"attend", "--platform", "cpu", "--out", "{d}/new_out.npy"};
  for (const std::string op : {"--q", "--k", "--v"}) {
    args.push_back(op);
    args.push_back(op == flag ? path : "{d}/" + op.substr(2) + ".npy");
  }
  if (flag == "--mask") args.insert(args.end(), {"--mask", path});
  return args;
}

std::vector<std::string> with_json(std::vector<std::string> args) {
  args.push_back("--json");
  return args;
}

TEST_F(BadInputFiles, BytesThatAreNotUtf8AreReportedInJson) {
  const std::string bad = "\xff\xfe";
  const std::vector<Row> rows = {
      {"subcommand", {bad, "--json"}, 2, "is not a diffattn subcommand", true},
      {"unknown flag", {"resolve", "--platform", "cpu", "--" + bad, "--json"}, 2, "unknown flag", true},
      {"role", {"resolve", "--platform", "cpu", "--role", bad, "--head-size", "64", "--json"}, 0, "", true},
      {"model", {"resolve", "--platform", "cpu", "--model", bad, "--json"}, 2, "unknown model", true},
      {"run model", {"run", "--platform", "cpu", "--model", bad, "--json"}, 2, "unknown model", true},
      {"input path", with_json(attend_with("--q", "{d}/" + bad + ".npy")), 2, "cannot open", true},
      {"backend", attend({"--out", "{d}/new_out.npy", "--json", "--backend", bad}), 2, "not valid UTF-8", true},
  };
  for (const Row& row : rows) check(row);
}

TEST_F(BadInputFiles, AnOutputNameThatIsNotUtf8IsWrittenAndReported) {
  const std::string name = "out_\xff\xfe.npy";
  const CliResult r = run_cli(expand(attend({"--out", "{d}/" + name, "--json"})));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json doc = r.json();
  ASSERT_TRUE(doc.is_object()) << "stdout is not JSON: " << r.out;
  EXPECT_EQ(doc.at("out").get<std::string>(), dir_.string() + "/out_\ufffd\ufffd.npy");
  EXPECT_TRUE(fs::is_regular_file(dir_ / name));
}

TEST_F(BadInputFiles, InputsThatAreNotRegularFilesOrLieAboutTheirSizeAreRefused) {
  const std::vector<Row> rows = {
      {"--q folder", attend_with("--q", "{d}/folder"), 2, "{d}/folder is a folder, not a file"},
      {"--k folder", attend_with("--k", "{d}/folder"), 2, "is a folder, not a file"},
      {"--v folder", attend_with("--v", "{d}/folder"), 2, "is a folder, not a file"},
      {"--mask folder", attend_with("--mask", "{d}/folder"), 2, "is a folder, not a file"},
      {"--q device", attend_with("--q", "/dev/zero"), 2, "/dev/zero is a character device, not a file"},
      {"--mask device", attend_with("--mask", "/dev/zero"), 2, "character device"},
      {"--q pipe", attend_with("--q", "{d}/pipe.npy"), 2, "is a pipe, not a file"},
      {"shape larger than the file", attend_with("--q", "{d}/lying_shape.npy"), 2, "the file is truncated or corrupt"},
      {"header longer than the file", attend_with("--k", "{d}/lying_header.npy"), 2, "header of 4294967280 bytes"},
      {"header not text", attend_with("--v", "{d}/binary_header.npy"), 2, "header holds bytes that are not text"},
      {"--platform device", {"resolve", "--model", "tiny-dit", "--platform", "/dev/zero"}, 2, "/dev/zero is a character device"},
      {"--platform folder", {"resolve", "--model", "tiny-dit", "--platform", "{d}/folder"}, 2, "is a folder, not a file"},
      {"--platform pipe", {"resolve", "--model", "tiny-dit", "--platform", "{d}/pipe.npy"}, 2, "is a pipe"},
      {"--platform huge", {"resolve", "--model", "tiny-dit", "--platform", "{d}/huge_platform.json"}, 2, "a platform description is at most"},
      {"--platform device json", {"backends", "--platform", "/dev/zero", "--json"}, 2, "character device", true},
      {"--plugin folder", {"backends", "--platform", "cpu", "--plugin", "{d}/folder"}, 2, "not a file; name a plugin library"},
      {"--plugin pipe", {"backends", "--platform", "cpu", "--plugin", "{d}/pipe.npy"}, 2, "not a file; name a plugin library"},
      {"--plugin device", {"backends", "--platform", "cpu", "--plugin", "/dev/zero"}, 2, "not a file; name a plugin library"},
      {"activation dump lies", {"run", "--platform", "cpu", "--activations", "{d}/acts", "--out-dir", "{d}/run_out", "--json"},
       2, "the file is truncated or corrupt", true},
  };
  for (Row row : rows) {
    if (row.message.find("{d}") != std::string::npos) row.message = expand({row.message}).front();
    check(row);
  }
}

TEST_F(BadInputFiles, OutputsThatWouldOverwriteAnInputOrCannotBeWrittenAreRefused) {
  const std::vector<Row> rows = {
      {"--out is --q", attend({"--out", "{d}/q.npy"}), 2, "--out {d}/q.npy names the same file as --q"},
      {"--out is --q spelled differently", attend({"--out", "{d}/folder/../q.npy"}), 2, "names the same file as --q"},
      {"--out is a link to --q", attend({"--out", "{d}/q_link.npy"}), 2, "names the same file as --q"},
      {"--lse is --k", attend({"--out", "{d}/new_out.npy", "--lse", "{d}/k.npy"}), 2, "--lse {d}/k.npy names the same file as --k"},
      {"--lse is --out", attend({"--out", "{d}/existing_out.npy", "--lse", "{d}/existing_out.npy"}), 2,
       "--lse {d}/existing_out.npy names the same file as --out"},
      {"--out is --q, --lse in a missing folder", attend({"--out", "{d}/q.npy", "--lse", "{d}/missing/l.npy"}), 2,
       "names the same file as --q"},
      {"existing --out, --lse in a missing folder",
       attend({"--out", "{d}/existing_out.npy", "--lse", "{d}/missing/l.npy"}), 2, "folder {d}/missing does not exist"},
      {"--out in a missing folder", attend({"--out", "{d}/missing/out.npy"}), 2, "does not exist"},
      {"--out is a folder", attend({"--out", "{d}/folder"}), 2, "is a folder; name a file to write"},
      {"--lse is a device", attend({"--out", "{d}/new_out.npy", "--lse", "/dev/null"}), 2, "is not a regular file"},
      {"--out where nothing can be created", attend({"--out", "/proc/diffattn_out.npy"}), 2, "cannot be written"},
      {"--out-dir is a file", {"run", "--platform", "cpu", "--out-dir", "{d}/existing_out.npy"}, 2, "is not a folder"},
      {"--out-dir under a file", {"run", "--platform", "cpu", "--out-dir", "{d}/existing_out.npy/run"}, 2, "is not a folder"},
      {"--out-dir where nothing can be created", {"run", "--platform", "cpu", "--out-dir", "/proc/diffattn_run"}, 2,
       "cannot be written"},
  };
  for (Row row : rows) {
    row.message = expand({row.message}).front();
    check(row);
  }
}

}  // namespace
}  // namespace diffattn
