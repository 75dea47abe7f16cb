#include "config/block_owners.h"

#include <algorithm>

#include "config/json_values.h"
#include "diffattn/registry.h"

namespace diffattn::config_detail {

BlockOwners block_owners(std::string_view block, const Registry& r) {
  BlockOwners owners{block, {}};
  for (const std::string& name : r.names()) {
    Result<const BackendDescriptor*> d = r.find(name);
    if (!d.ok()) continue;
    const auto& blocks = (*d)->caps.option_blocks;
    if (std::find(blocks.begin(), blocks.end(), block) != blocks.end()) owners.backends.push_back(name);
  }
  return owners;
}

bool owns_block(const BlockOwners& owners, std::string_view backend) {
  const std::string upper = ascii_upper(backend);
  return std::find(owners.backends.begin(), owners.backends.end(), upper) != owners.backends.end();
}

std::optional<std::string> block_owner_violation(const BlockOwners& owners, std::string_view backend) {
  if (owns_block(owners, backend)) return std::nullopt;
  if (owners.backends.empty())
    return std::string(owners.block) + " is accepted by no backend registered in this build, but backend=" +
           repr(backend) + ". Remove " + std::string(owners.block) + ".";
  const bool one = owners.backends.size() == 1;
  return std::string(owners.block) + " is only supported by the " + join(owners.backends, " and ") +
         (one ? " backend" : " backends") + ", but backend=" + repr(backend) + ". Remove " +
         std::string(owners.block) + " or set backend to " + join(owners.backends, " or ") + ".";
}

}  // namespace diffattn::config_detail
