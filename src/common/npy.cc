#include "common/npy.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "common/input_file.h"
#include "common/staged_files.h"

namespace diffattn::npy {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicSize = 6;
// Magic, version and the longest (4-byte) header length field.
constexpr std::size_t kPrefixBytes = kMagicSize + 2 + 4;
// Format version 1's limit, far more than the header of any array diffattn reads needs.
constexpr std::size_t kMaxHeaderBytes = 65535;

struct TypeInfo {
  ElementType type;
  const char* descr;
  std::size_t size;
};

constexpr TypeInfo kTypes[] = {
    {ElementType::kFloat32, "<f4", 4}, {ElementType::kFloat16, "<f2", 2}, {ElementType::kUInt16, "<u2", 2},
    {ElementType::kFloat64, "<f8", 8}, {ElementType::kBool, "|b1", 1},    {ElementType::kInt32, "<i4", 4},
};

// '<' is little-endian, '=' native (little-endian on every machine diffattn builds for), '|' byte-sized.
std::string normalise_descr(std::string d) {
  if (d.size() == 3 && d[0] == '=') d[0] = '<';
  if (d == "?" || d == "<b1" || d == "=b1") d = "|b1";
  if (d == "<u1") d = "|u1";
  return d;
}

Status invalid(std::string_view name, const std::string& what) {
  return InvalidInput(std::string(name) + ": " + what);
}

// Value of `key` in the header dict: the text after "'key':" up to the next top-level comma.
bool header_value(const std::string& header, const std::string& key, std::string& value) {
  const auto at = header.find("'" + key + "'");
  if (at == std::string::npos) return false;
  auto pos = header.find(':', at);
  if (pos == std::string::npos) return false;
  ++pos;
  while (pos < header.size() && header[pos] == ' ') ++pos;
  int depth = 0;
  std::size_t end = pos;
  for (; end < header.size(); ++end) {
    const char c = header[end];
    if (c == '(' || c == '[') ++depth;
    if (c == ')' || c == ']') --depth;
    if ((c == ',' || c == '}') && depth == 0) break;
  }
  value = header.substr(pos, end - pos);
  while (!value.empty() && value.back() == ' ') value.pop_back();
  return true;
}

Result<std::vector<std::int64_t>> parse_shape(const std::string& text, std::string_view name) {
  if (text.size() < 2 || text.front() != '(' || text.back() != ')')
    return invalid(name, "header shape '" + text + "' is not a tuple");
  std::vector<std::int64_t> shape;
  std::string item;
  // Empty when the item is a size (or blank), else what is wrong with it.
  auto flush = [&]() -> std::string {
    std::size_t b = item.find_first_not_of(' '), e = item.find_last_not_of(' ');
    if (b == std::string::npos) {
      item.clear();
      return "";
    }
    const std::string digits = item.substr(b, e - b + 1);
    item.clear();
    const bool negative = digits.size() > 1 && digits[0] == '-' && digits.find_first_not_of("0123456789", 1) == std::string::npos;
    if (negative) return "a negative size (" + digits + "); sizes are 0 or more";
    if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos)
      return "a non-integer size";
    shape.push_back(std::stoll(digits));
    return "";
  };
  for (std::size_t i = 1; i + 1 < text.size(); ++i) {
    if (text[i] == ',') {
      if (const std::string why = flush(); !why.empty()) return invalid(name, "header shape '" + text + "' holds " + why);
    } else {
      item += text[i];
    }
  }
  if (const std::string why = flush(); !why.empty()) return invalid(name, "header shape '" + text + "' holds " + why);
  return shape;
}

}  // namespace

std::size_t element_size(ElementType type) {
  for (const auto& t : kTypes)
    if (t.type == type) return t.size;
  return 0;
}

std::string_view descr(ElementType type) {
  for (const auto& t : kTypes)
    if (t.type == type) return t.descr;
  return "?";
}

std::int64_t Array::numel() const {
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  return n;
}

std::string Array::shape_string() const {
  std::string text = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1) text += ",";
  return text + ")";
}

namespace {

// Where the header dict lies: after the magic, version and length fields.
struct HeaderSpan {
  std::size_t start = 0;
  std::size_t length = 0;
};

// Reads the fixed prefix (the first kPrefixBytes of a file of `size` bytes, or all of it when shorter).
Result<HeaderSpan> header_span(const std::byte* prefix, std::size_t size, std::string_view name) {
  if (size < kMagicSize + 4 || std::memcmp(prefix, kMagic, kMagicSize) != 0)
    return invalid(name, "not a .npy file (the magic string \\x93NUMPY is missing); save arrays with numpy.save");
  const auto major = static_cast<unsigned>(prefix[6]);
  HeaderSpan span;
  if (major == 1) {
    span.length = static_cast<std::size_t>(prefix[8]) | static_cast<std::size_t>(prefix[9]) << 8;
    span.start = 10;
  } else if (major == 2 || major == 3) {
    if (size < kPrefixBytes) return invalid(name, "truncated .npy header");
    for (int i = 0; i < 4; ++i) span.length |= static_cast<std::size_t>(prefix[8 + i]) << (8 * i);
    span.start = kPrefixBytes;
  } else {
    return invalid(name, ".npy format version " + std::to_string(major) + " is not supported; use version 1, 2 or 3");
  }
  if (span.length > kMaxHeaderBytes)
    return invalid(name, ".npy header of " + std::to_string(span.length) + " bytes is longer than the " +
                             std::to_string(kMaxHeaderBytes) + " any plain array needs; the file is corrupt");
  if (span.start + span.length > size) return invalid(name, "truncated .npy header");
  return span;
}

// The element type and shape the header dict describes; the data is not read here.
Result<Array> parse_header(const std::string& header, std::string_view name) {
  // NumPy writes the header as ASCII text; anything else is damage, and must not reach a message.
  const auto not_text = [](char c) { return c != '\n' && (c < 0x20 || c > 0x7e); };
  if (std::any_of(header.begin(), header.end(), not_text))
    return invalid(name, ".npy header holds bytes that are not text; the file is corrupt: save it again with numpy.save");
  std::string descr_text, order_text, shape_text;
  if (!header_value(header, "descr", descr_text) || !header_value(header, "fortran_order", order_text) ||
      !header_value(header, "shape", shape_text))
    return invalid(name, ".npy header lacks descr, fortran_order or shape: " + header);
  if (descr_text.size() < 2 || (descr_text.front() != '\'' && descr_text.front() != '"'))
    return invalid(name, "structured dtype " + descr_text + " is not supported; save a plain numeric array");
  const std::string d = normalise_descr(descr_text.substr(1, descr_text.size() - 2));
  if (order_text != "False")
    return invalid(name, "array is stored in Fortran order; save it with numpy.ascontiguousarray first");

  Array array;
  bool known = false;
  for (const auto& t : kTypes)
    if (d == t.descr) {
      array.type = t.type;
      known = true;
    }
  if (!known) {
    const bool big_endian = !d.empty() && d[0] == '>';
    return invalid(name, "dtype '" + d + "' is not supported" +
                             (big_endian ? std::string(" (big-endian); convert with arr.astype(arr.dtype.newbyteorder('<'))")
                                         : std::string("; use float32 (<f4), float16 (<f2), bfloat16 stored as uint16 "
                                                       "(<u2), float64 (<f8), bool (|b1) or int32 (<i4)")));
  }
  DIFFATTN_ASSIGN_OR_RETURN(array.shape, parse_shape(shape_text, name));
  std::int64_t numel = 1;
  for (auto s : array.shape) {
    if (s != 0 && numel > std::numeric_limits<std::int64_t>::max() / 16 / s)
      return invalid(name, "shape " + shape_text + " is too large");
    numel *= s;
  }
  return array;
}

// The data section must be exactly what the shape needs, checked before any of it is read.
Status check_data_size(const Array& array, std::uint64_t data_bytes, std::string_view name) {
  const std::uint64_t expected = static_cast<std::uint64_t>(array.numel()) * element_size(array.type);
  if (data_bytes == expected) return Status::Ok();
  return invalid(name, "holds " + std::to_string(data_bytes) + " data bytes but shape " + array.shape_string() +
                           " of " + std::string(descr(array.type)) + " needs " + std::to_string(expected) +
                           "; the file is truncated or corrupt");
}

}  // namespace

Result<Array> parse(const std::byte* bytes, std::size_t size, std::string_view name) {
  DIFFATTN_ASSIGN_OR_RETURN(const HeaderSpan span, header_span(bytes, size, name));
  const std::string header(reinterpret_cast<const char*>(bytes + span.start), span.length);
  DIFFATTN_ASSIGN_OR_RETURN(Array array, parse_header(header, name));
  const std::size_t data_start = span.start + span.length;
  DIFFATTN_RETURN_IF_ERROR(check_data_size(array, size - data_start, name));
  array.data.assign(bytes + data_start, bytes + size);
  return array;
}

Result<Array> read_file(const std::string& path) {
  DIFFATTN_ASSIGN_OR_RETURN(const InputFile file, InputFile::open(path));
  std::byte prefix[kPrefixBytes] = {};
  const std::size_t prefix_size = static_cast<std::size_t>(std::min<std::uint64_t>(file.size(), kPrefixBytes));
  DIFFATTN_RETURN_IF_ERROR(file.read_at(0, prefix, prefix_size));
  DIFFATTN_ASSIGN_OR_RETURN(const HeaderSpan span, header_span(prefix, static_cast<std::size_t>(file.size()), path));
  std::string header(span.length, '\0');
  DIFFATTN_RETURN_IF_ERROR(file.read_at(span.start, header.data(), header.size()));
  DIFFATTN_ASSIGN_OR_RETURN(Array array, parse_header(header, path));
  const std::uint64_t data_start = span.start + span.length;
  DIFFATTN_RETURN_IF_ERROR(check_data_size(array, file.size() - data_start, path));
  array.data.resize(static_cast<std::size_t>(file.size() - data_start));
  DIFFATTN_RETURN_IF_ERROR(file.read_at(data_start, array.data.data(), array.data.size()));
  return array;
}

Result<std::string> file_header(const Array& array) {
  std::string header = "{'descr': '" + std::string(descr(array.type)) +
                       "', 'fortran_order': False, 'shape': " + array.shape_string() + ", }";
  // Version 1 header: magic (6) + version (2) + length (2) + header, padded with spaces to a
  // multiple of 64 bytes and ended by a newline.
  const std::size_t unpadded = kMagicSize + 4 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  if (header.size() > kMaxHeaderBytes) return InvalidInput("shape " + array.shape_string() + " is too long for a .npy header");
  const char prefix[] = {kMagic[0], kMagic[1], kMagic[2], kMagic[3], kMagic[4], kMagic[5], 1, 0,
                         static_cast<char>(header.size() & 0xff), static_cast<char>(header.size() >> 8)};
  return std::string(prefix, sizeof prefix) + header;
}

std::string_view data_bytes(const Array& array) {
  return {reinterpret_cast<const char*>(array.data.data()), array.data.size()};
}

Status write_file(const std::string& path, const Array& array) {
  DIFFATTN_ASSIGN_OR_RETURN(const std::string header, file_header(array));
  StagedFiles files;
  DIFFATTN_RETURN_IF_ERROR(files.stage(path, {header, data_bytes(array)}));
  return files.commit();
}

}  // namespace diffattn::npy
