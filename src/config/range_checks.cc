#include <cmath>
#include <string>

#include "config/json_values.h"
#include "config/typed_blocks.h"

namespace diffattn::config_detail {

Status check_in_range(double value, std::string_view field, std::string_view name, double lo, double hi) {
  const bool bounded = hi >= lo;
  const bool ok = std::isfinite(value) && value >= lo && (!bounded || value <= hi);
  if (ok) return Status::Ok();
  std::string text = std::string(name) + " must be finite and ";
  text += bounded ? "in [" + format_number(lo) + ", " + format_number(hi) + "]" : ">= " + format_number(lo);
  text += "; got " + format_number(value) + ".";
  return field_error(field, text);
}

Status check_block_is_object(const nlohmann::json& value, std::string_view field, std::string_view block) {
  if (value.is_object()) return Status::Ok();
  return field_error(field, std::string(block) + " must be an object; got " + std::string(json_type_name(value)) +
                                " " + brief_json(value) + ". Write it as " + std::string(block) + ": {...}.");
}

}  // namespace diffattn::config_detail
