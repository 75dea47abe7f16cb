#include "common/json_duplicates.h"

#include <set>
#include <vector>

namespace diffattn {
namespace {

using nlohmann::json;

// One open object or array; arrays keep no keys but hold the place of their elements in the path.
struct OpenContainer {
  bool is_object = false;
  std::set<std::string> keys;
  std::string current_key;
};

std::string path_to(const std::vector<OpenContainer>& open, const std::string& key) {
  std::string path;
  for (const OpenContainer& c : open)
    if (c.is_object && !c.current_key.empty()) path += c.current_key + ".";
    else if (!c.is_object) path += "[].";
  return path + key;
}

}  // namespace

json parse_json_noting_duplicates(std::string_view text, std::string& duplicate, bool allow_exceptions) {
  duplicate.clear();
  std::vector<OpenContainer> open;
  const json::parser_callback_t note = [&](int, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start: open.push_back({true, {}, {}}); break;
      case json::parse_event_t::array_start: open.push_back({false, {}, {}}); break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        if (!open.empty()) open.pop_back();
        break;
      case json::parse_event_t::key: {
        if (open.empty()) break;
        const std::string key = parsed.get<std::string>();
        if (!open.back().keys.insert(key).second && duplicate.empty()) {
          open.back().current_key.clear();
          duplicate = path_to(open, key);
        }
        open.back().current_key = key;
        break;
      }
      case json::parse_event_t::value: break;
    }
    return true;
  };
  return json::parse(text.begin(), text.end(), note, allow_exceptions);
}

}  // namespace diffattn
