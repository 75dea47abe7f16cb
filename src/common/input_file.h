#pragma once
// Files the user names as inputs. Only regular files are opened: a folder, device, pipe or socket
// is refused by name before anything is read, and callers read no more than their format allows.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "diffattn/status.h"

namespace diffattn {

// An open regular file and its size; closed when destroyed.
class InputFile {
 public:
  // `path` opened for reading; InvalidInput naming the path when it is missing, unreadable or not a
  // regular file.
  static Result<InputFile> open(const std::string& path);

  InputFile(InputFile&& other) noexcept;
  InputFile& operator=(InputFile&& other) noexcept;
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  ~InputFile();

  const std::string& path() const { return path_; }
  std::uint64_t size() const { return size_; }

  // Exactly `count` bytes from `offset`; a file that ends early (changed while read) is an error.
  Status read_at(std::uint64_t offset, void* into, std::size_t count) const;

 private:
  InputFile(int fd, std::string path, std::uint64_t size) : fd_(fd), path_(std::move(path)), size_(size) {}
  int fd_ = -1;
  std::string path_;
  std::uint64_t size_ = 0;
};

// The whole of a small text file (a platform description, a configuration) when it holds at most
// `max_bytes`; `what` names the file's role in messages, e.g. "platform description".
Result<std::string> read_small_file(const std::string& path, std::uint64_t max_bytes, std::string_view what);

}  // namespace diffattn
