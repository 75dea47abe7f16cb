#pragma once
// The backend x architecture matrix of docs/backend_matrix.md, computed from the registry and the
// platform routing on described platforms, so that the document can be checked against the code.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "diffattn/platform.h"
#include "diffattn/registry.h"

namespace diffattn::cli {

// Every cell is decided for this head size, for a mask-free model (TRTLLM_ATTN may be a default)
// and with every optional dependency present, so that the cells show routing policy; the kernels
// column says what this build actually runs.
inline constexpr int kMatrixHeadSize = 128;

// One column: an architecture group, e.g. "sm_80/86", and the platforms it stands for.
struct MatrixColumn {
  std::string label;
  std::vector<PlatformInfo> platforms;
};

std::vector<MatrixColumn> matrix_columns();

// Which diffattn kernels run a backend, from its declaration (empty: registered, but no kernel in diffattn).
std::string kernels_in_this_build(const BackendDescriptor& backend);
// Whether diffattn has a kernel for `backend` on the device of platforms of `kind`.
bool has_kernel_for(const BackendDescriptor& backend, const PlatformInfo& info);

// The matrix and the default route per column, as Markdown (what the document embeds) or JSON.
Result<std::string> backend_matrix_markdown(const Registry& registry);
Result<nlohmann::json> backend_matrix_json(const Registry& registry);

// Prints the matrix on stdout; returns the exit code.
int print_backend_matrix(const Registry& registry, bool json);

}  // namespace diffattn::cli
