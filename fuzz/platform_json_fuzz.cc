// libFuzzer target: arbitrary bytes as a --platform FILE.json description. Malformed input must give
// an error that prints inside JSON; a description that loads must print, describe itself, and load
// back from its own JSON to an equal platform.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "diffattn/platform.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const nlohmann::json value = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return 0;  // load_platform refuses it as "not valid JSON" without parsing further
  auto info = diffattn::platform_from_json(value);
  if (!info.ok()) {
    if (info.status().message().empty()) std::abort();  // every error must say something
    // Messages go to terminals and into JSON: dump() throws, and the fuzzer stops, on text that is not UTF-8.
    (void)nlohmann::json(info.status().message()).dump();
    return 0;
  }
  (void)nlohmann::json(info->describe()).dump();
  const nlohmann::json printed = diffattn::platform_to_json(*info);
  auto again = diffattn::platform_from_json(printed);
  if (!again.ok() || !(again.value() == info.value())) {
    std::fprintf(stderr, "round trip mismatch\ninput: %.*s\nprinted: %s\n%s\n", static_cast<int>(size),
                 reinterpret_cast<const char*>(data), printed.dump().c_str(), again.status().message().c_str());
    std::abort();
  }
  return 0;
}
