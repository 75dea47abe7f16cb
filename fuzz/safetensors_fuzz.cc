// libFuzzer target: arbitrary bytes as a safetensors file (an activation dump). Malformed input must
// give an error that prints inside JSON; a header that parses must give every tensor its own bytes
// inside the data section, exactly as many as its shape and dtype need.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/safetensors.h"

namespace st = diffattn::safetensors;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto header = st::parse(reinterpret_cast<const std::byte*>(data), size, "fuzz.safetensors");
  if (!header.ok()) {
    if (header.status().message().empty()) std::abort();  // every error must say something
    // The CLI prints messages inside JSON: dump() throws, and the fuzzer stops, on text that is not UTF-8.
    (void)nlohmann::json(header.status().message()).dump();
    return 0;
  }
  if (header->data_start > size) std::abort();
  const std::uint64_t data_size = size - header->data_start;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  for (const auto& [name, info] : header->tensors) {
    const auto bytes = static_cast<std::uint64_t>(info.numel()) * diffattn::dtype_size(info.dtype);
    if (info.begin > info.end || info.end > data_size || info.end - info.begin != bytes) {
      std::fprintf(stderr, "tensor %s accepted with bytes [%llu, %llu) for shape %s in %llu data bytes\n",
                   nlohmann::json(name).dump().c_str(), static_cast<unsigned long long>(info.begin),
                   static_cast<unsigned long long>(info.end), info.shape_string().c_str(),
                   static_cast<unsigned long long>(data_size));
      std::abort();
    }
    if (info.end > info.begin) ranges.emplace_back(info.begin, info.end);
  }
  std::sort(ranges.begin(), ranges.end());
  for (std::size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second) std::abort();  // overlapping tensors were accepted
  (void)nlohmann::json(st::tensor_names(*header)).dump();
  return 0;
}
