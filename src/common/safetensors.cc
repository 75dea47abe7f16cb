#include "common/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "common/input_file.h"

namespace diffattn::safetensors {
namespace {

using json = nlohmann::json;

constexpr std::string_view kSupported = "F32, F16 and BF16";
constexpr std::string_view kRewrite = "write the file again with safetensors.torch.save_file";

Status invalid(std::string_view name, const std::string& what) { return InvalidInput(std::string(name) + ": " + what); }

// A name or value as JSON text, ASCII only and cut short, so that any header prints safely.
std::string brief(const json& value) {
  constexpr std::size_t kMax = 60;
  std::string text;
  if (value.is_array()) {
    text = "[";
    std::size_t i = 0;
    for (; i < value.size() && text.size() < kMax; ++i)
      text += (i ? ", " : "") + (value[i].is_structured() ? std::string(value[i].is_array() ? "[...]" : "{...}") : brief(value[i]));
    return text + (i < value.size() ? ", ...]" : "]");
  }
  if (value.is_object()) return "an object";
  text = value.dump(-1, ' ', true, json::error_handler_t::replace);
  if (text.size() > kMax) text = text.substr(0, kMax) + "...";
  return text;
}

std::string quote_name(const std::string& name) { return brief(json(name)); }

std::optional<DType> supported_dtype(const std::string& name) {
  if (name == "F32") return DType::kFloat32;
  if (name == "F16") return DType::kFloat16;
  if (name == "BF16") return DType::kBFloat16;
  return std::nullopt;
}

bool multiply(std::uint64_t a, std::uint64_t b, std::uint64_t& out) { return !__builtin_mul_overflow(a, b, &out); }

// The parser's own words, without the bytes it last read (which need not be printable).
std::string parse_error_reason(const json::parse_error& e) {
  std::string what = e.what();
  if (const auto cut = what.find("; last read"); cut != std::string::npos) what.resize(cut);
  if (const auto colon = what.find(": "); colon != std::string::npos) what.erase(0, colon + 2);
  for (char& c : what)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
  return what;
}

std::string byte_range(const TensorInfo& t) {
  std::string text = "bytes [";
  text += std::to_string(t.begin);
  text += ", ";
  text += std::to_string(t.end);
  return text + ")";
}

Result<TensorInfo> parse_tensor(const std::string& tensor, const json& entry, std::uint64_t data_size,
                                std::string_view name) {
  const std::string who = "tensor " + quote_name(tensor);
  if (!entry.is_object())
    return invalid(name, who + " is described by " + brief(entry) +
                             ", not an object with \"dtype\", \"shape\" and \"data_offsets\"; " + std::string(kRewrite));
  for (const char* field : {"dtype", "shape", "data_offsets"})
    if (!entry.contains(field))
      return invalid(name, who + " has no \"" + field +
                               "\"; every tensor needs \"dtype\", \"shape\" and \"data_offsets\"; " + std::string(kRewrite));
  TensorInfo info;
  const json& dtype = entry.at("dtype");
  if (!dtype.is_string())
    return invalid(name, who + " has dtype " + brief(dtype) + ", which is not a string such as \"F32\"; " + std::string(kRewrite));
  const auto type = supported_dtype(dtype.get_ref<const std::string&>());
  if (!type)
    return invalid(name, who + " has dtype " + brief(dtype) + "; diffattn reads " + std::string(kSupported) +
                             ": convert before saving (for example tensor.to(torch.bfloat16))");
  info.dtype = *type;

  const json& shape = entry.at("shape");
  const auto bad_shape = [&] {
    return invalid(name, who + " has shape " + brief(shape) + "; a shape is a list of non-negative integers; " +
                             std::string(kRewrite));
  };
  if (!shape.is_array()) return bad_shape();
  std::uint64_t bytes = dtype_size(info.dtype);
  for (const json& s : shape) {
    if (!s.is_number_unsigned()) return bad_shape();
    const auto size = s.get<std::uint64_t>();
    if (size > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) || !multiply(bytes, size, bytes))
      return invalid(name, who + " has shape " + brief(shape) + ", too large to hold in memory; the header is corrupt; " +
                               std::string(kRewrite));
    info.shape.push_back(static_cast<std::int64_t>(size));
  }

  const json& offsets = entry.at("data_offsets");
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned() ||
      offsets[0].get<std::uint64_t>() > offsets[1].get<std::uint64_t>())
    return invalid(name, who + " has data_offsets " + brief(offsets) +
                             "; they must be [begin, end] with 0 <= begin <= end; " + std::string(kRewrite));
  info.begin = offsets[0].get<std::uint64_t>();
  info.end = offsets[1].get<std::uint64_t>();
  if (info.end > data_size)
    return invalid(name, who + " occupies " + byte_range(info) + " of the data section, which has only " + std::to_string(data_size) +
                             " bytes; the file is truncated (copy it again) or its header is corrupt");
  if (info.end - info.begin != bytes)
    return invalid(name, who + " spans " + std::to_string(info.end - info.begin) + " bytes but shape " + info.shape_string() +
                             " of " + std::string(dtype_code(info.dtype)) + " needs " + std::to_string(bytes) +
                             "; the header is corrupt; " + std::string(kRewrite));
  return info;
}

Status check_no_overlap(const Header& header, std::string_view name) {
  std::vector<std::pair<std::string, const TensorInfo*>> ranges;
  for (const auto& [tensor, info] : header.tensors)
    if (info.end > info.begin) ranges.emplace_back(tensor, &info);  // empty tensors occupy no bytes
  std::sort(ranges.begin(), ranges.end(), [](const auto& a, const auto& b) { return a.second->begin < b.second->begin; });
  const std::pair<std::string, const TensorInfo*>* reach = nullptr;  // the range seen so far that ends last
  for (const auto& r : ranges) {
    if (reach && r.second->begin < reach->second->end)
      return invalid(name, "tensors " + quote_name(reach->first) + " (" + byte_range(*reach->second) + ") and " +
                               quote_name(r.first) + " (" + byte_range(*r.second) +
                               ") overlap; each tensor needs its own bytes; " + std::string(kRewrite));
    if (!reach || r.second->end > reach->second->end) reach = &r;
  }
  return Status::Ok();
}

Status check_header_length(std::uint64_t header_len, std::uint64_t file_size, std::string_view name) {
  if (file_size < 8)
    return invalid(name, "is " + std::to_string(file_size) +
                             " bytes, shorter than the 8-byte header length that starts a safetensors file; the file is "
                             "truncated (copy it again) or is not a safetensors file");
  if (header_len > kMaxHeaderBytes)
    return invalid(name, "header length field says " + std::to_string(header_len) + " bytes, more than the " +
                             std::to_string(kMaxHeaderBytes) +
                             " a safetensors header may have; the file is corrupt or is not a safetensors file");
  if (header_len > file_size - 8)
    return invalid(name, "header length field says " + std::to_string(header_len) + " bytes but only " +
                             std::to_string(file_size - 8) +
                             " follow it; the file is truncated (copy it again) or is not a safetensors file");
  return Status::Ok();
}

std::uint64_t little_endian_u64(const unsigned char* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

}  // namespace

std::int64_t TensorInfo::numel() const {
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  return n;
}

std::string TensorInfo::shape_string() const {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

std::string_view dtype_code(DType dtype) {
  switch (dtype) {
    case DType::kFloat16: return "F16";
    case DType::kBFloat16: return "BF16";
    default: return "F32";
  }
}

std::string tensor_names(const Header& header) {
  constexpr std::size_t kShown = 8;
  std::string names;
  std::size_t shown = 0;
  for (const auto& [name, info] : header.tensors) {
    if (shown == kShown) return names + " and " + std::to_string(header.tensors.size() - kShown) + " more";
    names += (shown++ ? ", " : "") + quote_name(name);
  }
  return names.empty() ? "no tensors" : names;
}

Result<Header> parse_header(std::string_view text, std::uint64_t data_size, std::string_view name) {
  std::set<std::string> names;
  std::string duplicate;
  const json::parser_callback_t note_duplicates = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth == 1 && event == json::parse_event_t::key && duplicate.empty() && !names.insert(parsed.get<std::string>()).second)
      duplicate = parsed.get<std::string>();
    return true;
  };
  json doc;
  try {
    doc = json::parse(text.begin(), text.end(), note_duplicates);
  } catch (const json::parse_error& e) {
    return invalid(name, "header is not valid JSON (" + parse_error_reason(e) +
                             "); the file is corrupt or is not a safetensors file; " + std::string(kRewrite));
  } catch (const json::exception&) {
    return invalid(name, "header is not valid JSON; the file is corrupt or is not a safetensors file; " + std::string(kRewrite));
  }
  if (!doc.is_object())
    return invalid(name, "header is " + brief(doc) + ", not a JSON object mapping tensor names to their dtype, shape and "
                         "data_offsets; the file is corrupt or is not a safetensors file");
  if (!duplicate.empty())
    return invalid(name, "header describes tensor " + quote_name(duplicate) + " twice; each name may appear once; " +
                             std::string(kRewrite));

  Header header;
  header.data_start = 8 + text.size();
  for (const auto& [key, entry] : doc.items()) {
    if (key == "__metadata__") {
      if (!entry.is_object())
        return invalid(name, "\"__metadata__\" is " + brief(entry) + ", not an object of strings; " + std::string(kRewrite));
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string())
          return invalid(name, "\"__metadata__\" entry " + quote_name(k) + " is " + brief(v) +
                                   ", not a string; metadata values must be strings; " + std::string(kRewrite));
        header.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    DIFFATTN_ASSIGN_OR_RETURN(header.tensors[key], parse_tensor(key, entry, data_size, name));
  }
  DIFFATTN_RETURN_IF_ERROR(check_no_overlap(header, name));
  return header;
}

Result<Header> parse(const std::byte* bytes, std::size_t size, std::string_view name) {
  const std::uint64_t header_len = size >= 8 ? little_endian_u64(reinterpret_cast<const unsigned char*>(bytes)) : 0;
  DIFFATTN_RETURN_IF_ERROR(check_header_length(header_len, size, name));
  const std::string_view text(reinterpret_cast<const char*>(bytes) + 8, header_len);
  return parse_header(text, size - 8 - header_len, name);
}

Result<Header> read_header(const std::string& path) {
  DIFFATTN_ASSIGN_OR_RETURN(const InputFile file, InputFile::open(path));
  unsigned char prefix[8] = {};
  if (file.size() >= 8) DIFFATTN_RETURN_IF_ERROR(file.read_at(0, prefix, 8));
  const std::uint64_t header_len = file.size() >= 8 ? little_endian_u64(prefix) : 0;
  DIFFATTN_RETURN_IF_ERROR(check_header_length(header_len, file.size(), path));
  std::string text(header_len, '\0');
  DIFFATTN_RETURN_IF_ERROR(file.read_at(8, text.data(), text.size()));
  return parse_header(text, file.size() - 8 - header_len, path);
}

Result<std::vector<std::byte>> read_tensor_data(const std::string& path, const Header& header, const std::string& tensor) {
  const auto it = header.tensors.find(tensor);
  if (it == header.tensors.end())
    return invalid(path, "has no tensor " + quote_name(tensor) + "; it holds " + tensor_names(header));
  const TensorInfo& info = it->second;
  DIFFATTN_ASSIGN_OR_RETURN(const InputFile file, InputFile::open(path));
  if (header.data_start + info.end > file.size())
    return invalid(path, "the file ended inside tensor " + quote_name(tensor) + "; it changed while being read or is truncated; copy it again");
  std::vector<std::byte> data(info.end - info.begin);
  DIFFATTN_RETURN_IF_ERROR(file.read_at(header.data_start + info.begin, data.data(), data.size()));
  return data;
}

}  // namespace diffattn::safetensors
