// The zoo embedded at build time (models/zoo.json), parsed once, and lookups by name.
#include "models/model_zoo.h"

#include <cstdio>
#include <cstdlib>

namespace diffattn {
namespace internal {
extern const char* const kEmbeddedModelZooJson;
}  // namespace internal

const std::vector<ModelSpec>& model_zoo() {
  // The embedded JSON is checked by the tests; a broken build must still fail loudly, not run empty.
  static const std::vector<ModelSpec> zoo = [] {
    auto parsed = parse_model_zoo(internal::kEmbeddedModelZooJson);
    if (!parsed.ok()) {
      std::fprintf(stderr, "diffattn: embedded model zoo is invalid: %s\n", parsed.status().message().c_str());
      std::abort();
    }
    return std::move(parsed).value();
  }();
  return zoo;
}

Result<const ModelSpec*> find_model(std::string_view name) {
  std::string names;
  for (const ModelSpec& m : model_zoo()) {
    if (m.name == name) return &m;
    names += (names.empty() ? "" : ", ") + m.name;
  }
  return InvalidConfig("unknown model '" + std::string(name) + "'; known models: " + names +
                       " (add one to models/zoo.json)");
}

}  // namespace diffattn
