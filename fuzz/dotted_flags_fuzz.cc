// libFuzzer target: arbitrary bytes as command-line configuration flags. Each line is one flag:
// "PATH=VALUE" is --diffusion-attention-config.PATH VALUE, and the prefixes "json:", "backend:",
// "topk:" and "env:" give the JSON object, the shorthand, --fastvideo-vsa-topk and the
// environment. Malformed input must give an error; a parsed config must print and re-parse.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "diffattn/builtin_backends.h"
#include "diffattn/config.h"

namespace {

bool take_prefix(std::string_view& line, std::string_view prefix) {
  if (line.substr(0, prefix.size()) != prefix) return false;
  line.remove_prefix(prefix.size());
  return true;
}

std::int64_t small_integer(std::string_view text) {
  std::int64_t value = 0;
  bool negative = false;
  for (char c : text.substr(0, 12)) {
    if (c == '-') negative = true;
    if (c >= '0' && c <= '9') value = value * 10 + (c - '0');
  }
  return negative ? -value : value;
}

void add_line(std::string_view line, diffattn::ConfigSources& sources, std::optional<std::string>& env) {
  if (take_prefix(line, "json:")) {
    sources.config_json = std::string(line);
  } else if (take_prefix(line, "backend:")) {
    sources.backend_shorthand = std::string(line);
  } else if (take_prefix(line, "topk:")) {
    sources.fastvideo_vsa_topk = small_integer(line);
  } else if (take_prefix(line, "env:")) {
    env = std::string(line);
  } else {
    const std::size_t eq = line.find('=');
    const std::string_view path = line.substr(0, eq);
    const std::string_view value = eq == std::string_view::npos ? std::string_view() : line.substr(eq + 1);
    sources.dotted.emplace_back(std::string(path), std::string(value));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  diffattn::ConfigSources sources;
  std::optional<std::string> env;
  while (!rest.empty()) {
    const std::size_t newline = rest.find('\n');
    add_line(rest.substr(0, newline), sources, env);
    if (newline == std::string_view::npos) break;
    rest.remove_prefix(newline + 1);
  }
  auto config = diffattn::build_attention_config(sources, env, diffattn::global_registry());
  if (!config.ok()) {
    if (config.status().message().empty()) std::abort();  // every error must say something
    // The CLI prints messages inside JSON: dump() throws, and the fuzzer stops, on text that is not UTF-8.
    (void)nlohmann::json(config.status().message()).dump();
    return 0;
  }
  const std::string printed = diffattn::config_to_json(*config).dump();
  auto again = diffattn::parse_attention_config_json(printed, diffattn::global_registry());
  // The printed form does not carry where the default came from; everything else must match.
  if (again.ok()) again->default_origin = config->default_origin;
  if (!again.ok() || !(again.value() == config.value())) {
    std::fprintf(stderr, "round trip mismatch\nprinted: %s\n%s\n", printed.c_str(), again.status().message().c_str());
    std::abort();
  }
  return 0;
}
