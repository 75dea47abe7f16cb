#include "diffattn/log.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

namespace diffattn {
namespace {

LogLevel threshold_from_env() {
  const char* env = std::getenv("DIFFATTN_LOG_LEVEL");
  if (env == nullptr) return LogLevel::kInfo;
  const std::string v(env);
  if (v == "debug") return LogLevel::kDebug;
  if (v == "warning") return LogLevel::kWarning;
  if (v == "error") return LogLevel::kError;
  return LogLevel::kInfo;
}

std::string_view level_name(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "DEBUG";
    case LogLevel::kInfo: return "INFO";
    case LogLevel::kWarning: return "WARNING";
    case LogLevel::kError: return "ERROR";
  }
  return "INFO";
}

void stderr_sink(LogLevel level, std::string_view message) {
  static const LogLevel threshold = threshold_from_env();
  if (level < threshold) return;
  std::fprintf(stderr, "[diffattn] %.*s %.*s\n", static_cast<int>(level_name(level).size()),
               level_name(level).data(), static_cast<int>(message.size()), message.data());
}

std::mutex& sink_mutex() {
  static std::mutex mu;
  return mu;
}

LogSink& current_sink() {
  static LogSink sink = stderr_sink;
  return sink;
}

}  // namespace

LogSink set_log_sink(LogSink sink) {
  std::lock_guard<std::mutex> lock(sink_mutex());
  LogSink previous = std::move(current_sink());
  current_sink() = sink ? std::move(sink) : LogSink(stderr_sink);
  return previous;
}

void log(LogLevel level, std::string_view message) {
  std::lock_guard<std::mutex> lock(sink_mutex());
  current_sink()(level, message);
}

}  // namespace diffattn
