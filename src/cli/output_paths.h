#pragma once
// Checks on the files a subcommand will write, made before any work so that a mistake in a path
// costs nothing and can never overwrite an input.

#include <string>
#include <string_view>
#include <vector>

#include "diffattn/status.h"

namespace diffattn::cli {

// A file flag and the path given to it, e.g. {"--out", "out.npy"}.
struct FlagPath {
  std::string_view flag;
  std::string path;
};

// True when `a` and `b` name one file: the same inode when both exist, otherwise the same path
// once resolved (symbolic links, "..", ".").
bool names_same_file(const std::string& a, const std::string& b);

// Every output must name a file of its own (not an input, not another output) in a folder that
// exists and can be written; otherwise a usage error that names both flags.
Status check_output_paths(const std::vector<FlagPath>& inputs, const std::vector<FlagPath>& outputs);

}  // namespace diffattn::cli
