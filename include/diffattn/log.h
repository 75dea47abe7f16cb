#pragma once
// Minimal leveled logging with a replaceable sink (tests capture lines; the CLI writes stderr).

#include <functional>
#include <string>
#include <string_view>

namespace diffattn {

enum class LogLevel { kDebug, kInfo, kWarning, kError };

using LogSink = std::function<void(LogLevel, std::string_view)>;

// Replaces the sink; returns the previous one. The default writes "[diffattn] INFO ..." to stderr
// for kInfo and above (DIFFATTN_LOG_LEVEL=debug|info|warning|error changes the threshold).
LogSink set_log_sink(LogSink sink);
// The default sink's threshold from DIFFATTN_LOG_LEVEL (info when unset), read once; an unknown
// value keeps info and prints one warning on stderr naming the valid values.
LogLevel env_log_threshold();
void log(LogLevel level, std::string_view message);
inline void log_info(std::string_view m) { log(LogLevel::kInfo, m); }
inline void log_warning(std::string_view m) { log(LogLevel::kWarning, m); }
inline void log_debug(std::string_view m) { log(LogLevel::kDebug, m); }

}  // namespace diffattn
