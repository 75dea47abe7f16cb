#include "common/name_hints.h"

namespace diffattn {

std::string bounded_echo(std::string_view text, std::size_t limit) {
  if (text.size() <= limit) return std::string(text);
  // Cut on a character boundary: half a UTF-8 sequence would make the message unprintable as JSON.
  std::size_t cut = limit;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80) --cut;
  return std::string(text.substr(0, cut)) + "...";
}

}  // namespace diffattn
