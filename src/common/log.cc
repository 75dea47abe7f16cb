#include "diffattn/log.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>

#include "common/name_hints.h"

namespace diffattn {
namespace {

std::optional<LogLevel> parse_log_level(std::string_view v) {
  if (v == "debug") return LogLevel::kDebug;
  if (v == "info") return LogLevel::kInfo;
  if (v == "warning") return LogLevel::kWarning;
  if (v == "error") return LogLevel::kError;
  return std::nullopt;
}

LogLevel threshold_from_env() {
  const char* env = std::getenv("DIFFATTN_LOG_LEVEL");
  if (env == nullptr) return LogLevel::kInfo;
  if (std::optional<LogLevel> level = parse_log_level(env)) return *level;
  // Written directly: the sink that would carry it is the one being configured.
  const std::string shown = bounded_echo(env);
  std::fprintf(stderr, "[diffattn] WARNING DIFFATTN_LOG_LEVEL='%s' is not a log level; valid values are debug, "
               "info, warning and error. Using info.\n", shown.c_str());
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
  if (level < env_log_threshold()) return;
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

LogLevel env_log_threshold() {
  static const LogLevel threshold = threshold_from_env();
  return threshold;
}

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
