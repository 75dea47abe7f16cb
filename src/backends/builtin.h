#pragma once
// One registration function per built-in backend, each defined in its backend's folder
// (src/backends/<name>/descriptor.cc); register_builtin_backends calls them in order.

#include "diffattn/builtin_backends.h"

namespace diffattn {

void register_torch_sdpa(Registry& registry);
void register_flash_attn(Registry& registry);
void register_cudnn_attn(Registry& registry);
void register_flashinfer_attn(Registry& registry);
void register_trtllm_attn(Registry& registry);
void register_sage_attn(Registry& registry);
void register_sage_attn_3(Registry& registry);
void register_rainfusion_attn(Registry& registry);
void register_fastvideo_vsa(Registry& registry);

}  // namespace diffattn
