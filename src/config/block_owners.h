#pragma once
// Which backends own which typed block, as data: a block on any other backend is a configuration error.

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "diffattn/config.h"

namespace diffattn::config_detail {

struct BlockOwners {
  std::string_view block;                     // spec key, e.g. "quant"
  std::span<const std::string_view> backends;  // canonical upper-case names
};

BlockOwners skip_softmax_owners();
BlockOwners quant_owners();
BlockOwners fastvideo_vsa_topk_owners();
BlockOwners block_sparse_owners();

bool owns_block(const BlockOwners& owners, std::string_view backend);

// Reason a spec may not carry a block, or nullopt when its backend owns it.
std::optional<std::string> block_owner_violation(const BlockOwners& owners, std::string_view backend);

}  // namespace diffattn::config_detail
