#include "cli/output.h"

#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "common/json_text.h"
#include "diffattn/status.h"

namespace diffattn::cli {

void print_json(const nlohmann::json& document) {
  std::cout << json_text(document, 2) << std::endl;
}

int report_error(const Status& status, bool json) {
  const Status shown = status.ok() ? Internal("an error was reported without a cause") : status;
  std::cerr << "diffattn: error [" << error_code_name(shown.code()) << "]: " << shown.message()
            << std::endl;
  if (json) {
    const nlohmann::json error = {
        {"error", {{"code", std::string(error_code_name(shown.code()))}, {"message", shown.message()}}}};
    std::cout << json_text(error) << std::endl;
  }
  return exit_code_for(shown.code());
}

}  // namespace diffattn::cli
