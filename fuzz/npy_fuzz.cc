// libFuzzer target: arbitrary bytes as a .npy file (attend's inputs, activation dumps). Malformed
// input must give an error that prints inside JSON; an array that parses must hold exactly the
// bytes its shape and dtype need, and must write and read back unchanged.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "common/npy.h"

namespace npy = diffattn::npy;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto array = npy::parse(reinterpret_cast<const std::byte*>(data), size, "fuzz.npy");
  if (!array.ok()) {
    if (array.status().message().empty()) std::abort();  // every error must say something
    // Messages go to terminals and into JSON: dump() throws, and the fuzzer stops, on text that is not UTF-8.
    (void)nlohmann::json(array.status().message()).dump();
    return 0;
  }
  const auto needed = static_cast<std::uint64_t>(array->numel()) * npy::element_size(array->type);
  if (array->numel() < 0 || array->data.size() != needed) {
    std::fprintf(stderr, "shape %s of %s accepted with %zu data bytes\n", array->shape_string().c_str(),
                 std::string(npy::descr(array->type)).c_str(), array->data.size());
    std::abort();
  }
  auto header = npy::file_header(*array);
  if (!header.ok()) return 0;  // a shape too long to write back is refused, not truncated
  const std::string written = *header + std::string(npy::data_bytes(*array));
  auto again = npy::parse(reinterpret_cast<const std::byte*>(written.data()), written.size(), "written.npy");
  if (!again.ok() || again->type != array->type || again->shape != array->shape || again->data != array->data) {
    std::fprintf(stderr, "round trip mismatch for shape %s: %s\n", array->shape_string().c_str(),
                 again.status().message().c_str());
    std::abort();
  }
  return 0;
}
