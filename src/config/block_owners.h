#pragma once
// Which backends own which typed block: a block on any other backend is a configuration error.
// Ownership is declared once, by each backend's descriptor (Capabilities::option_blocks); the
// owners here are read from the registry's descriptors.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "diffattn/config.h"

namespace diffattn {
class Registry;
}

namespace diffattn::config_detail {

struct BlockOwners {
  std::string_view block;             // spec key, e.g. "quant"
  std::vector<std::string> backends;  // canonical upper-case names, in registration order
};

// The backends of `registry` (default: the global registry) that declare `block`.
BlockOwners block_owners(std::string_view block, const Registry* registry = nullptr);
inline BlockOwners skip_softmax_owners() { return block_owners("skip_softmax"); }
inline BlockOwners quant_owners() { return block_owners("quant"); }
inline BlockOwners fastvideo_vsa_topk_owners() { return block_owners("fastvideo_vsa_topk"); }
inline BlockOwners block_sparse_owners() { return block_owners("block_sparse"); }

bool owns_block(const BlockOwners& owners, std::string_view backend);

// Reason a spec may not carry a block, or nullopt when its backend owns it.
std::optional<std::string> block_owner_violation(const BlockOwners& owners, std::string_view backend);

}  // namespace diffattn::config_detail
