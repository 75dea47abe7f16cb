#pragma once
// The launches of SAGE_ATTN's Ampere/Ada kernel (sage_fwd_ampere.cuh): its 16-bit P*V mode
// (sage_ampere.cu, compute_80) and its FP8 P*V mode (sage_ada.cu, compute_89).

#include <cuda_runtime.h>

#include "diffattn/status.h"
#include "kernels/cuda/sage/sage_params.h"

namespace diffattn::sage {

inline constexpr int kSageAmpereTileRows = 64;  // query rows per CTA: four warps of 16

// p.num_m_blocks counts tiles of kSageAmpereTileRows rows; the workspace holds INT8 Q and K.
Status launch_sage_ampere(const SageParams& p, cudaStream_t stream);

// The FP8 P*V mode (sm_89 and newer): the workspace also holds V in E4M3 and its scales.
Status launch_sage_ada_fp8(const SageParams& p, cudaStream_t stream);

// FLASHINFER_ATTN's QK16/V8 mode on the same kernel (sm_89 and newer): Q K^T from the caller's
// 16-bit Q and K, V in E4M3 from the quantization kernels.
Status launch_qk16_v8_ada(const SageParams& p, cudaStream_t stream);

}  // namespace diffattn::sage
