#pragma once
// Output files written all or nothing. Each file is first written whole to a temporary in its
// target's folder; commit() then moves every temporary into place, and if any move fails the
// targets are put back as they were. Temporaries not committed are removed on destruction, so a
// failure anywhere leaves the caller's files untouched and no temporary behind.

#include <string>
#include <string_view>
#include <vector>

#include "diffattn/status.h"

namespace diffattn {

class StagedFiles {
 public:
  StagedFiles() = default;
  StagedFiles(const StagedFiles&) = delete;
  StagedFiles& operator=(const StagedFiles&) = delete;
  ~StagedFiles();

  // Writes `pieces`, one after another, to a temporary beside `path`. A `path` that names a folder
  // or device, or whose folder is missing or read-only, is an error naming it.
  Status stage(const std::string& path, std::vector<std::string_view> pieces);
  // Moves every staged file to its path; on failure every path holds what it held before.
  Status commit();

 private:
  struct Entry {
    std::string target;
    std::string temporary;
    std::string backup;        // the target's previous content while committing; empty: none
    bool backup_moved = false;  // the backup was made by moving the target away, not by a link
    bool placed = false;        // the temporary has replaced the target
  };
  void roll_back();
  void remove_temporaries();
  std::vector<Entry> entries_;
};

// Checks before a long job that `folder` (or, when it does not exist yet, the nearest folder above
// it that does) can hold new files, by creating and removing a temporary file there.
Status check_folder_writable(const std::string& folder, std::string_view flag);

}  // namespace diffattn
