// libFuzzer target: arbitrary bytes as --diffusion-attention-config JSON. Malformed input must give
// an error; a config that parses must print and re-parse to an equal value.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "diffattn/builtin_backends.h"
#include "diffattn/config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto config = diffattn::parse_attention_config_json(text, diffattn::global_registry());
  if (!config.ok()) {
    if (config.status().message().empty()) std::abort();  // every error must say something
    // The CLI prints messages inside JSON: dump() throws, and the fuzzer stops, on text that is not UTF-8.
    (void)nlohmann::json(config.status().message()).dump();
    return 0;
  }
  for (const auto& [role, spec] : config->per_role) {
    (void)diffattn::backend_kwargs(spec).dump();
    (void)diffattn::resolve_spec_for_role(*config, role, "cross");
  }
  const std::string printed = diffattn::config_to_json(*config).dump();
  auto again = diffattn::parse_attention_config_json(printed, diffattn::global_registry());
  if (!again.ok() || !(again.value() == config.value())) {
    std::fprintf(stderr, "round trip mismatch\ninput: %.*s\nprinted: %s\n%s\n", static_cast<int>(size),
                 reinterpret_cast<const char*>(data), printed.c_str(), again.status().message().c_str());
    std::abort();
  }
  return 0;
}
