#include "backends/builtin.h"

namespace diffattn {

void register_builtin_backends(Registry& registry) {
  register_torch_sdpa(registry);
  register_flash_attn(registry);
  register_cudnn_attn(registry);
  register_flashinfer_attn(registry);
  register_trtllm_attn(registry);
  register_sage_attn(registry);
  register_sage_attn_3(registry);
  register_rainfusion_attn(registry);
  register_fastvideo_vsa(registry);
}

}  // namespace diffattn
