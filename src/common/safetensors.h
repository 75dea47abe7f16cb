#pragma once
// safetensors files: an 8-byte little-endian header length N, N bytes of JSON giving each tensor's
// dtype, shape and byte range ({"q": {"dtype": "BF16", "shape": [1, 4096, 24, 128],
// "data_offsets": [0, 25165824]}, "__metadata__": {...}}), then the raw little-endian data.
// diffattn reads F32, F16 and BF16 tensors. A header that does not describe the file exactly
// (lengths, ranges, byte counts, overlaps, duplicate names) is refused with a message that names
// the file, what is wrong and what to do instead.

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "diffattn/dtype.h"
#include "diffattn/status.h"

namespace diffattn::safetensors {

// The largest header accepted; the safetensors format sets the same limit.
inline constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;

struct TensorInfo {
  DType dtype = DType::kFloat32;  // kFloat32, kFloat16 or kBFloat16
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;  // byte range [begin, end) within the data section
  std::uint64_t end = 0;

  std::int64_t numel() const;
  std::string shape_string() const;  // "[1, 4096, 24, 128]"
};

struct Header {
  std::map<std::string, TensorInfo> tensors;
  std::map<std::string, std::string> metadata;  // "__metadata__"
  std::uint64_t data_start = 0;                 // file offset of the data section: 8 + N
};

// The format's name of a dtype: "F32", "F16" or "BF16".
std::string_view dtype_code(DType dtype);

// The header's tensor names for messages: quoted, ASCII only, the first few ("\"q\", \"k\"").
std::string tensor_names(const Header& header);

// Checks the JSON header against a data section of `data_size` bytes; `name` is used in messages.
Result<Header> parse_header(std::string_view json, std::uint64_t data_size, std::string_view name);

// Checks a whole safetensors image held in memory.
Result<Header> parse(const std::byte* bytes, std::size_t size, std::string_view name);

// Reads and checks the header of the file at `path`, without reading the tensors.
Result<Header> read_header(const std::string& path);

// Reads the bytes of tensor `tensor` (C order, little-endian) from the file whose header is `header`.
Result<std::vector<std::byte>> read_tensor_data(const std::string& path, const Header& header, const std::string& tensor);

}  // namespace diffattn::safetensors
