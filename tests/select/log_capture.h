#pragma once
// Captures log lines for the lifetime of the object (restores the previous sink afterwards).

#include <mutex>
#include <string>
#include <vector>

#include "diffattn/log.h"

namespace diffattn::testing {

class LogCapture {
 public:
  LogCapture() {
    previous_ = set_log_sink([this](LogLevel level, std::string_view message) {
      std::lock_guard lock(mu_);
      if (level == LogLevel::kInfo) lines_.emplace_back(message);
    });
  }
  ~LogCapture() { set_log_sink(std::move(previous_)); }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  // INFO lines that contain `part`.
  std::vector<std::string> lines_with(const std::string& part) const {
    std::lock_guard lock(mu_);
    std::vector<std::string> out;
    for (const std::string& line : lines_) {
      if (line.find(part) != std::string::npos) out.push_back(line);
    }
    return out;
  }

 private:
  LogSink previous_;
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
};

}  // namespace diffattn::testing
