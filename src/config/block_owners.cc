#include "config/block_owners.h"

#include <array>

#include "config/json_values.h"

namespace diffattn::config_detail {
namespace {

constexpr std::array<std::string_view, 1> kSkipSoftmaxBackends = {"TRTLLM_ATTN"};
constexpr std::array<std::string_view, 2> kQuantBackends = {"TRTLLM_ATTN", "FLASHINFER_ATTN"};
constexpr std::array<std::string_view, 1> kFastVideoBackends = {"FASTVIDEO_VSA"};
constexpr std::array<std::string_view, 1> kBlockSparseBackends = {"RAINFUSION_ATTN"};

}  // namespace

BlockOwners skip_softmax_owners() { return {"skip_softmax", kSkipSoftmaxBackends}; }
BlockOwners quant_owners() { return {"quant", kQuantBackends}; }
BlockOwners fastvideo_vsa_topk_owners() { return {"fastvideo_vsa_topk", kFastVideoBackends}; }
BlockOwners block_sparse_owners() { return {"block_sparse", kBlockSparseBackends}; }

bool owns_block(const BlockOwners& owners, std::string_view backend) {
  const std::string upper = ascii_upper(backend);
  for (std::string_view name : owners.backends) {
    if (upper == name) return true;
  }
  return false;
}

std::optional<std::string> block_owner_violation(const BlockOwners& owners, std::string_view backend) {
  if (owns_block(owners, backend)) return std::nullopt;
  const bool one = owners.backends.size() == 1;
  return std::string(owners.block) + " is only supported by the " + join(owners.backends, " and ") +
         (one ? " backend" : " backends") + ", but backend=" + repr(backend) + ". Remove " +
         std::string(owners.block) + " or set backend to " + join(owners.backends, " or ") + ".";
}

}  // namespace diffattn::config_detail
