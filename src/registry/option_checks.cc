#include "registry/option_checks.h"

#include <algorithm>
#include <utility>

#include "common/strings.h"

namespace diffattn {
namespace {

std::vector<std::string> blocks_set_on(const AttentionSpec& spec) {
  std::vector<std::string> blocks;
  if (spec.quant) blocks.push_back("quant");
  if (spec.skip_softmax) blocks.push_back("skip_softmax");
  if (spec.block_sparse) blocks.push_back("block_sparse");
  if (spec.fastvideo_vsa_topk) blocks.push_back("fastvideo_vsa_topk");
  return blocks;
}

}  // namespace

Status check_option_blocks(const BackendDescriptor& descriptor, const AttentionSpec& spec) {
  const auto& owned = descriptor.caps.option_blocks;
  for (const std::string& block : blocks_set_on(spec)) {
    if (std::find(owned.begin(), owned.end(), block) != owned.end()) continue;
    return InvalidConfig("The '" + block + "' block is not read by " + descriptor.name +
                         " (it reads: " + join(owned, ", ", "(none)") + "). Remove '" + block +
                         "' or select a backend that consumes it.");
  }
  return Status::Ok();
}

Status check_extra_keys(const AttentionSpec& spec, std::string_view backend,
                        const std::vector<std::string>& accepted_keys) {
  if (!spec.extra.is_object()) {
    return InvalidConfig("extra for " + std::string(backend) + " must be a JSON object of backend parameters.");
  }
  for (const auto& [key, value] : spec.extra.items()) {
    if (std::find(accepted_keys.begin(), accepted_keys.end(), key) != accepted_keys.end()) continue;
    return InvalidConfig(std::string(backend) + " does not read extra." + key +
                         " (extra keys it reads: " + join(accepted_keys, ", ", "(none)") +
                         "). Remove the key or select the backend that defines it.");
  }
  return Status::Ok();
}

Status check_value_in(std::string_view backend, std::string_view field, const std::string& value,
                      const std::vector<std::string>& allowed) {
  if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return Status::Ok();
  return InvalidConfig(std::string(backend) + " supports " + std::string(field) + " in [" + join(allowed, ", ", "(none)") +
                       "], got '" + value + "'. Choose one of those values or another backend.");
}

}  // namespace diffattn
