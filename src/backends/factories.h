#pragma once
// Factories of the backends that run diffattn's own kernels. Each is implemented in its backend's
// folder; in a build without CUDA the CUDA-only ones return kUnavailable with what to do instead.

#include <memory>

#include "diffattn/backend.h"
#include "diffattn/status.h"

namespace diffattn {

Result<std::unique_ptr<Backend>> create_torch_sdpa_backend(const BackendInit& init);
Result<std::unique_ptr<Backend>> create_cudnn_attn_backend(const BackendInit& init);
Result<std::unique_ptr<Backend>> create_flash_attn_backend(const BackendInit& init);
Result<std::unique_ptr<Backend>> create_sage_attn_backend(const BackendInit& init);
Result<std::unique_ptr<Backend>> create_flashinfer_attn_backend(const BackendInit& init);

}  // namespace diffattn
