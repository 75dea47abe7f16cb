// The one dispatch ladder from run-time (dtype, head-dim bucket) to a compiled tensor-core kernel,
// and the choice between that kernel and the SIMT one.

#include <string>

#include "common/reason.h"
#include "kernels/cuda/dense/sdpa_instances.h"
#include "kernels/cuda/dense/sdpa_launch.h"
#include "kernels/cuda/dense/tile_config.h"

namespace diffattn::cuda {
namespace {

std::string compiled_buckets() {
  return join(kCompiledHeadDims, ", ", "", [](int d) { return std::to_string(d); });
}

template <typename T>
Status dispatch_bucket(const SdpaParams& p, cudaStream_t stream) {
  const int widest = p.head_dim > p.head_dim_v ? p.head_dim : p.head_dim_v;
  switch (head_dim_bucket(widest)) {
    case 32: return launch_mma_bucket<T, 32>(p, stream);
    case 64: return launch_mma_bucket<T, 64>(p, stream);
    case 96: return launch_mma_bucket<T, 96>(p, stream);
    case 128: return launch_mma_bucket<T, 128>(p, stream);
    case 160: return launch_mma_bucket<T, 160>(p, stream);
    case 192: return launch_mma_bucket<T, 192>(p, stream);
    case 256: return launch_mma_bucket<T, 256>(p, stream);
    default: break;
  }
  return Unsupported("head size " + std::to_string(widest) + " has no compiled tensor-core SDPA kernel; compiled: " +
                     compiled_buckets() + " (smaller head sizes are padded up)");
}

}  // namespace

Status launch_sdpa_mma(const SdpaParams& p, void* stream) {
  if (auto reasons = mma_path_reasons(p); !reasons.empty()) {
    return Unsupported("the tensor-core SDPA kernel cannot run this problem: " + reasons_text(reasons) +
                       "; launch_sdpa runs the SIMT kernel instead");
  }
  if (p.batch == 0 || p.seqlen_q == 0 || p.heads_q == 0) return Status::Ok();
  auto s = static_cast<cudaStream_t>(stream);
  if (p.dtype == DType::kFloat16) return dispatch_bucket<__half>(p, s);
  return dispatch_bucket<__nv_bfloat16>(p, s);
}

Status launch_sdpa(const SdpaParams& p, void* stream) {
  if (mma_path_reasons(p).empty()) return launch_sdpa_mma(p, stream);
  return launch_sdpa_generic(p, stream);
}

}  // namespace diffattn::cuda
