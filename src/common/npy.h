#pragma once
// NumPy .npy files (format versions 1-3): little-endian, C-order arrays of float32 (<f4), float16
// (<f2), uint16 (<u2, how bfloat16 is stored), float64 (<f8), bool (|b1) and int32 (<i4). Anything
// else is refused with a message that names the file, what it holds and what to pass instead.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "diffattn/status.h"

namespace diffattn::npy {

enum class ElementType { kFloat32, kFloat16, kUInt16, kFloat64, kBool, kInt32 };

std::size_t element_size(ElementType type);
std::string_view descr(ElementType type);  // "<f4", "<f2", "<u2", "<f8", "|b1", "<i4"

struct Array {
  ElementType type = ElementType::kFloat32;
  std::vector<std::int64_t> shape;
  std::vector<std::byte> data;  // C order, little-endian

  std::int64_t numel() const;
  std::string shape_string() const;  // "(2, 3)"
};

Result<Array> read_file(const std::string& path);
// Parses a whole .npy image held in memory; `name` is used in messages.
Result<Array> parse(const std::byte* bytes, std::size_t size, std::string_view name);

// The bytes of a .npy file before its data: magic, version, header length and header.
Result<std::string> file_header(const Array& array);
// The array's data as the bytes that follow the header.
std::string_view data_bytes(const Array& array);

// Writes `path` through a temporary file in the same folder and a rename, so a failed write never
// leaves a partial file behind. Several files written together go through StagedFiles
// (common/staged_files.h) with file_header and data_bytes.
Status write_file(const std::string& path, const Array& array);

}  // namespace diffattn::npy
