#include "cli/output.h"

#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "diffattn/status.h"

namespace diffattn::cli {

void print_json(const nlohmann::json& document) {
  std::cout << document.dump(2) << std::endl;
}

std::string join(const std::vector<std::string>& items, const std::string& separator,
                 const std::string& empty) {
  if (items.empty()) return empty;
  std::string text = items.front();
  for (std::size_t i = 1; i < items.size(); ++i) text += separator + items[i];
  return text;
}

int report_error(const Status& status, bool json) {
  const Status shown = status.ok() ? Internal("an error was reported without a cause") : status;
  std::cerr << "diffattn: error [" << error_code_name(shown.code()) << "]: " << shown.message()
            << std::endl;
  if (json) {
    const nlohmann::json error = {
        {"error", {{"code", std::string(error_code_name(shown.code()))}, {"message", shown.message()}}}};
    std::cout << error.dump() << std::endl;
  }
  return exit_code_for(shown.code());
}

}  // namespace diffattn::cli
