#include "common/staged_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace diffattn {
namespace {

namespace fs = std::filesystem;

std::string errno_text(int error) { return std::strerror(error); }

// A new, empty file beside `target` (same folder, so renaming it onto the target is atomic),
// created exclusively so that no other file is ever reused.
Result<std::pair<std::string, int>> create_beside(const std::string& target, std::string_view purpose) {
  static std::atomic<unsigned> counter{0};
  const fs::path path(target);
  const fs::path folder = path.has_parent_path() ? path.parent_path() : fs::path(".");
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string leaf = ".";
    for (const std::string& part : {path.filename().string(), std::string(purpose), std::to_string(::getpid()),
                                    std::to_string(counter++)})
      leaf.append(part).append(".");
    leaf.pop_back();
    const std::string name = (folder / leaf).string();
    const int fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) return std::pair{name, fd};
    if (errno != EEXIST)
      return InvalidInput("cannot write " + target + ": " + errno_text(errno) + " in folder " + folder.string() +
                          "; check that the folder exists and is writable");
  }
  return InvalidInput("cannot write " + target + ": no free temporary name in " + folder.string());
}

Status write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return InvalidInput(errno_text(errno));
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return Status::Ok();
}

// True when `path` exists and is something other than a regular file (a folder, device, pipe).
bool exists_but_not_regular(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode);
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

}  // namespace

StagedFiles::~StagedFiles() { remove_temporaries(); }

Status StagedFiles::stage(const std::string& path, std::vector<std::string_view> pieces) {
  if (exists_but_not_regular(path))
    return InvalidInput(path + " exists and is not a regular file (a folder or device); name a file to write");
  DIFFATTN_ASSIGN_OR_RETURN(auto created, create_beside(path, "tmp"));
  auto [temporary, fd] = created;
  Entry entry;
  entry.target = path;
  entry.temporary = temporary;
  entries_.push_back(std::move(entry));
  Status written = Status::Ok();
  for (std::string_view piece : pieces) {
    written = write_all(fd, piece);
    if (!written.ok()) break;
  }
  const bool closed = ::close(fd) == 0;
  if (written.ok() && !closed) written = InvalidInput(errno_text(errno));
  if (!written.ok()) return InvalidInput("cannot write " + path + ": " + written.message() + "; nothing was written");
  return Status::Ok();
}

Status StagedFiles::commit() {
  // Checked again here: a target may have become a folder since it was staged.
  for (const Entry& e : entries_) {
    if (!exists_but_not_regular(e.target)) continue;
    Status failed = InvalidInput(e.target + " exists and is not a regular file (a folder or device); no file was changed");
    roll_back();  // clears entries_, e included
    return failed;
  }
  // A single file needs no backup: one rename replaces it atomically.
  if (entries_.size() > 1) {
    for (Entry& e : entries_) {
      if (!exists(e.target)) continue;
      auto created = create_beside(e.target, "previous");
      if (!created.ok()) {
        roll_back();
        return created.status();
      }
      ::close(created->second);
      e.backup = created->first;
      // A hard link keeps the target in place; filesystems without links get a move instead.
      ::unlink(e.backup.c_str());
      if (::link(e.target.c_str(), e.backup.c_str()) == 0) continue;
      if (::rename(e.target.c_str(), e.backup.c_str()) != 0) {
        Status failed = InvalidInput("cannot replace " + e.target + ": " + errno_text(errno) + "; no file was changed");
        e.backup.clear();
        roll_back();  // clears entries_, e included
        return failed;
      }
      e.backup_moved = true;
    }
  }
  for (Entry& e : entries_) {
    if (::rename(e.temporary.c_str(), e.target.c_str()) != 0) {
      Status failed =
          InvalidInput("cannot move the result to " + e.target + ": " + errno_text(errno) + "; no file was changed");
      roll_back();  // clears entries_, e included
      return failed;
    }
    e.placed = true;
    e.temporary.clear();
  }
  for (Entry& e : entries_)
    if (!e.backup.empty()) ::unlink(e.backup.c_str());
  entries_.clear();
  return Status::Ok();
}

void StagedFiles::roll_back() {
  for (Entry& e : entries_) {
    if (e.placed && e.backup.empty()) ::unlink(e.target.c_str());
    if ((e.placed || e.backup_moved) && !e.backup.empty()) {
      ::rename(e.backup.c_str(), e.target.c_str());
    } else if (!e.backup.empty()) {
      ::unlink(e.backup.c_str());
    }
    e.backup.clear();
    e.placed = false;
  }
  remove_temporaries();
}

void StagedFiles::remove_temporaries() {
  for (const Entry& e : entries_)
    if (!e.temporary.empty()) ::unlink(e.temporary.c_str());
  entries_.clear();
}

Status check_folder_writable(const std::string& folder, std::string_view flag) {
  std::error_code ec;
  fs::path existing = fs::absolute(fs::path(folder), ec);
  while (!existing.empty() && !fs::exists(existing, ec) && existing != existing.parent_path())
    existing = existing.parent_path();
  if (!fs::is_directory(existing, ec))
    return InvalidInput(std::string(flag) + " " + folder + ": " + existing.string() +
                        " is not a folder; choose a folder path you can write to");
  const std::string probe = (existing / (".diffattn-writable." + std::to_string(::getpid()))).string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    return InvalidInput(std::string(flag) + " " + folder + " cannot be written: creating a file in " + existing.string() +
                        " failed (" + errno_text(errno) + "); choose a folder you can write to");
  ::close(fd);
  ::unlink(probe.c_str());
  return Status::Ok();
}

}  // namespace diffattn
