#pragma once
// Which backends own which typed block: a block on any other backend is a configuration error.
// Ownership is declared once, by each backend's descriptor (Capabilities::option_blocks); the
// owners here are read from the descriptors of the registry the caller passes (the core never
// reaches for the backends layer's global registry).

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

// The backends of `registry` that declare `block`.
BlockOwners block_owners(std::string_view block, const Registry& registry);

bool owns_block(const BlockOwners& owners, std::string_view backend);

// Reason a spec may not carry a block, or nullopt when its backend owns it.
std::optional<std::string> block_owner_violation(const BlockOwners& owners, std::string_view backend);

}  // namespace diffattn::config_detail
