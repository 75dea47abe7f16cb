#include "common/npy.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>

namespace diffattn::npy {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicSize = 6;

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

Result<Array> parse(const std::byte* bytes, std::size_t size, std::string_view name) {
  if (size < kMagicSize + 4 || std::memcmp(bytes, kMagic, kMagicSize) != 0)
    return invalid(name, "not a .npy file (the magic string \\x93NUMPY is missing); save arrays with numpy.save");
  const auto major = static_cast<unsigned>(bytes[6]);
  std::size_t header_len = 0, header_start = 0;
  if (major == 1) {
    header_len = static_cast<std::size_t>(bytes[8]) | static_cast<std::size_t>(bytes[9]) << 8;
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) return invalid(name, "truncated .npy header");
    header_len = 0;
    for (int i = 0; i < 4; ++i) header_len |= static_cast<std::size_t>(bytes[8 + i]) << (8 * i);
    header_start = 12;
  } else {
    return invalid(name, ".npy format version " + std::to_string(major) + " is not supported; use version 1, 2 or 3");
  }
  if (header_start + header_len > size) return invalid(name, "truncated .npy header");
  const std::string header(reinterpret_cast<const char*>(bytes + header_start), header_len);

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
  const std::size_t data_start = header_start + header_len;
  const std::size_t expected = static_cast<std::size_t>(numel) * element_size(array.type);
  if (size - data_start != expected)
    return invalid(name, "holds " + std::to_string(size - data_start) + " data bytes but shape " + shape_text +
                             " of " + d + " needs " + std::to_string(expected) + "; the file is truncated or corrupt");
  array.data.assign(bytes + data_start, bytes + size);
  return array;
}

Result<Array> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidInput("cannot open " + path + ": " + std::strerror(errno) + "; check the path");
  std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return InvalidInput("cannot read " + path + ": " + std::strerror(errno));
  return parse(reinterpret_cast<const std::byte*>(raw.data()), raw.size(), path);
}

Status write_file(const std::string& path, const Array& array) {
  std::string header = "{'descr': '" + std::string(descr(array.type)) +
                       "', 'fortran_order': False, 'shape': " + array.shape_string() + ", }";
  // Version 1 header: magic (6) + version (2) + length (2) + header, padded with spaces to a
  // multiple of 64 bytes and ended by a newline.
  const std::size_t unpadded = kMagicSize + 4 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  if (header.size() > 65535) return InvalidInput("shape " + array.shape_string() + " is too long for a .npy header");
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return InvalidInput("cannot create " + tmp + ": " + std::strerror(errno) + "; check that the folder exists and is writable");
    const char version[2] = {1, 0};
    const char len[2] = {static_cast<char>(header.size() & 0xff), static_cast<char>(header.size() >> 8)};
    out.write(kMagic, kMagicSize);
    out.write(version, 2);
    out.write(len, 2);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    out.write(reinterpret_cast<const char*>(array.data.data()), static_cast<std::streamsize>(array.data.size()));
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      return InvalidInput("cannot write " + tmp + ": " + std::strerror(errno));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    return InvalidInput("cannot move the result to " + path + ": " + why);
  }
  return Status::Ok();
}

}  // namespace diffattn::npy
