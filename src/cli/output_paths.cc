#include "cli/output_paths.h"

#include <filesystem>

#include "cli/args.h"
#include "common/staged_files.h"

namespace diffattn::cli {
namespace {

namespace fs = std::filesystem;

// The path with links and dot segments resolved as far as it exists; lexical past that.
fs::path resolved(const std::string& path) {
  std::error_code ec;
  const fs::path absolute = fs::absolute(path, ec);
  if (ec) return fs::path(path).lexically_normal();
  const fs::path canonical = fs::weakly_canonical(absolute, ec);
  return ec ? absolute.lexically_normal() : canonical;
}

Status clash(const FlagPath& output, const FlagPath& other) {
  return UsageError(std::string(output.flag) + " " + output.path + " names the same file as " +
                    std::string(other.flag) + " " + other.path + "; write each result to a file of its own");
}

}  // namespace

bool names_same_file(const std::string& a, const std::string& b) {
  std::error_code ec_a, ec_b;
  const bool a_exists = fs::exists(a, ec_a), b_exists = fs::exists(b, ec_b);
  if (a_exists && b_exists) {
    std::error_code ec;
    const bool same = fs::equivalent(a, b, ec);
    if (!ec) return same;
  }
  return resolved(a) == resolved(b);
}

Status check_output_paths(const std::vector<FlagPath>& inputs, const std::vector<FlagPath>& outputs) {
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const FlagPath& out = outputs[i];
    for (const FlagPath& in : inputs)
      if (names_same_file(out.path, in.path)) return clash(out, in);
    for (std::size_t j = 0; j < i; ++j)
      if (names_same_file(out.path, outputs[j].path)) return clash(out, outputs[j]);
    std::error_code ec;
    if (fs::is_directory(out.path, ec))
      return UsageError(std::string(out.flag) + " " + out.path + " is a folder; name a file to write, e.g. " +
                        (fs::path(out.path) / "out.npy").string());
    // Replacing a device or pipe by a file (as root, /dev/null) would break the system, not write to it.
    if (fs::exists(out.path, ec) && !fs::is_regular_file(out.path, ec))
      return UsageError(std::string(out.flag) + " " + out.path + " is not a regular file; name a file to write");
    const fs::path folder = fs::path(out.path).has_parent_path() ? fs::path(out.path).parent_path() : fs::path(".");
    if (!fs::is_directory(folder, ec))
      return UsageError(std::string(out.flag) + " " + out.path + ": folder " + folder.string() +
                        " does not exist; create it first or choose another path");
    DIFFATTN_RETURN_IF_ERROR(check_folder_writable(folder.string(), out.flag));
  }
  return Status::Ok();
}

}  // namespace diffattn::cli
