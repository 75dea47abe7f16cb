#include "common/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace diffattn {
namespace {

// What a non-regular file is, for the message that refuses it.
std::string_view kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a pipe";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

Status not_regular(const std::string& path, mode_t mode) {
  return InvalidInput(path + " is " + std::string(kind_of(mode)) + ", not a file; give the path of a file on disk");
}

Status cannot(std::string_view verb, const std::string& path, int error) {
  return InvalidInput("cannot " + std::string(verb) + " " + path + ": " + std::strerror(error) +
                      "; check the path and its permissions");
}

}  // namespace

Result<InputFile> InputFile::open(const std::string& path) {
  struct stat st {};
  // Checked before opening, since opening a pipe blocks until something writes to it.
  if (::stat(path.c_str(), &st) != 0) return cannot("open", path, errno);
  if (!S_ISREG(st.st_mode)) return not_regular(path, st.st_mode);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return cannot("open", path, errno);
  InputFile file(fd, path, 0);
  // Checked again on what was opened: the path may have been replaced in between.
  if (::fstat(fd, &st) != 0) return cannot("read", path, errno);
  if (!S_ISREG(st.st_mode)) return not_regular(path, st.st_mode);
  file.size_ = static_cast<std::uint64_t>(st.st_size);
  return file;
}

InputFile::InputFile(InputFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)), size_(other.size_) {}

InputFile& InputFile::operator=(InputFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
    size_ = other.size_;
  }
  return *this;
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

Status InputFile::read_at(std::uint64_t offset, void* into, std::size_t count) const {
  auto* out = static_cast<char*>(into);
  while (count > 0) {
    const ssize_t n = ::pread(fd_, out, count, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return cannot("read", path_, errno);
    if (n == 0)
      return InvalidInput(path_ + " ended before its format says it should; it changed while being read or is "
                                  "truncated; copy it again");
    out += n;
    offset += static_cast<std::uint64_t>(n);
    count -= static_cast<std::size_t>(n);
  }
  return Status::Ok();
}

Result<std::string> read_small_file(const std::string& path, std::uint64_t max_bytes, std::string_view what) {
  DIFFATTN_ASSIGN_OR_RETURN(InputFile file, InputFile::open(path));
  if (file.size() > max_bytes)
    return InvalidInput(path + " holds " + std::to_string(file.size()) + " bytes; a " + std::string(what) +
                        " is at most " + std::to_string(max_bytes) + " bytes: check that this is the right file");
  std::string text(static_cast<std::size_t>(file.size()), '\0');
  DIFFATTN_RETURN_IF_ERROR(file.read_at(0, text.data(), text.size()));
  return text;
}

}  // namespace diffattn
