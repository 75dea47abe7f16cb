#include "config/dotted_flags.h"

#include <vector>

#include "common/json_duplicates.h"
#include "common/name_hints.h"
#include "config/json_values.h"

namespace diffattn::config_detail {
namespace {

using nlohmann::json;

Result<std::vector<std::string>> split_path(std::string_view path, std::string_view flag, std::string_view prefix) {
  std::vector<std::string> segments;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = path.find('.', start);
    const std::string_view segment = path.substr(start, dot == std::string_view::npos ? dot : dot - start);
    if (segment.empty()) {
      return InvalidConfig(std::string(flag) + " has an empty path segment; write it as " + std::string(prefix) +
                           "<key>.<key> VALUE with every key named (e.g. " + std::string(prefix) +
                           "default.backend NAME, or for the schedule profiles.<name>.default.backend NAME).");
    }
    segments.emplace_back(segment);
    if (segments.size() > static_cast<std::size_t>(kMaxJsonDepth)) {
      return InvalidConfig(std::string(flag) + " nests deeper than " + std::to_string(kMaxJsonDepth) + " levels.");
    }
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return segments;
}

Status conflict(std::string_view flag, const std::string& path, const json& existing, const json& value) {
  return InvalidConfig(std::string(flag) + " sets " + path + " to " + brief_json(value) + ", but " + path +
                       " is already " + brief_json(existing) +
                       " from an earlier flag or the JSON config. Give either a value for " + path +
                       " or keys under it, not both.");
}

// Objects merge key by key; anything else replaces, unless a value meets keys or keys meet a value.
Status merge_value(json& parent, const std::string& key, const json& value, const std::string& path,
                   std::string_view flag) {
  if (!parent.contains(key)) {
    parent[key] = value;
    return Status::Ok();
  }
  json& existing = parent[key];
  if (existing.is_object() && value.is_object()) {
    for (const auto& item : value.items()) {
      DIFFATTN_RETURN_IF_ERROR(merge_value(existing, item.key(), item.value(), path + "." + item.key(), flag));
    }
    return Status::Ok();
  }
  if (existing.is_object() || value.is_object()) return conflict(flag, path, existing, value);
  existing = value;
  return Status::Ok();
}

Status set_path(json& root, const std::vector<std::string>& segments, const json& value, std::string_view flag) {
  json* node = &root;
  std::string walked;
  for (std::size_t i = 0; i + 1 < segments.size(); ++i) {
    walked += (i == 0 ? "" : ".") + segments[i];
    if (!node->contains(segments[i])) (*node)[segments[i]] = json::object();
    json& child = (*node)[segments[i]];
    if (!child.is_object()) {
      return InvalidConfig(std::string(flag) + " sets a key under " + walked + ", but " + walked + " is already " +
                           brief_json(child) + " from an earlier flag or the JSON config. Give either a value for " +
                           walked + " or keys under it, not both.");
    }
    node = &child;
  }
  walked += (segments.size() == 1 ? "" : ".") + segments.back();
  return merge_value(*node, segments.back(), value, walked, flag);
}

}  // namespace

Result<json> typed_flag_value(std::string_view text, std::string_view flag) {
  if (!is_valid_utf8(text)) return InvalidConfig(std::string(flag) + " has a value that is not valid UTF-8.");
  if (json_text_depth(text) > kMaxJsonDepth) {
    return InvalidConfig(std::string(flag) + " has a value nested deeper than " + std::to_string(kMaxJsonDepth) +
                         " levels.");
  }
  std::string duplicate;
  json value = parse_json_noting_duplicates(text, duplicate, /*allow_exceptions=*/false);
  if (value.is_discarded()) return json(std::string(text));
  if (!duplicate.empty())
    return InvalidConfig(std::string(flag) + " has the key '" + sanitize_utf8(bounded_echo(duplicate)) +
                         "' twice; keep one (a repeated key would silently override the first).");
  return value;
}

Status merge_dotted_flags(json& root, std::span<const std::pair<std::string, std::string>> flags,
                          std::string_view flag_prefix) {
  for (const auto& [path, text] : flags) {
    if (!is_valid_utf8(path)) return InvalidConfig("a " + std::string(flag_prefix) + "<path> flag is not valid UTF-8.");
    const std::string flag = std::string(flag_prefix) + path;
    DIFFATTN_ASSIGN_OR_RETURN(std::vector<std::string> segments, split_path(path, flag, flag_prefix));
    DIFFATTN_ASSIGN_OR_RETURN(json value, typed_flag_value(text, flag));
    DIFFATTN_RETURN_IF_ERROR(set_path(root, segments, value, flag));
  }
  return Status::Ok();
}

}  // namespace diffattn::config_detail
