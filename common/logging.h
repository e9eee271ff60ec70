// Project logging: spdlog behind one header, so the backend can change
// without touching call sites. Format strings are fmt-style: "{} steps".
#ifndef RL_COMMON_LOGGING_H_
#define RL_COMMON_LOGGING_H_

#include <string_view>

#include "spdlog/spdlog.h"

namespace rl {

enum class LogLevel { kDebug, kInfo, kWarning, kError };

// Names the process in every line ("[learner] ...") and sets the level.
// Safe to call more than once; the last call wins.
void InitLogging(std::string_view component, LogLevel level = LogLevel::kInfo);

}  // namespace rl

#define RL_LOG_DEBUG(...) ::spdlog::debug(__VA_ARGS__)
#define RL_LOG_INFO(...) ::spdlog::info(__VA_ARGS__)
#define RL_LOG_WARNING(...) ::spdlog::warn(__VA_ARGS__)
#define RL_LOG_ERROR(...) ::spdlog::error(__VA_ARGS__)

#endif  // RL_COMMON_LOGGING_H_
