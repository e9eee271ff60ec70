#include "common/logging.h"

#include <string>

namespace rl {

void InitLogging(std::string_view component, LogLevel level) {
  spdlog::set_pattern("%Y-%m-%d %H:%M:%S.%e [" + std::string(component) +
                      "] %^%l%$ %v");
  switch (level) {
    case LogLevel::kDebug:
      spdlog::set_level(spdlog::level::debug);
      break;
    case LogLevel::kInfo:
      spdlog::set_level(spdlog::level::info);
      break;
    case LogLevel::kWarning:
      spdlog::set_level(spdlog::level::warn);
      break;
    case LogLevel::kError:
      spdlog::set_level(spdlog::level::err);
      break;
  }
}

}  // namespace rl
