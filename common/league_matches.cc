#include "common/league_matches.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace rl {

absl::Status AppendLeagueMatches(const std::string& path,
                                 const std::vector<LeagueMatch>& matches) {
  std::error_code ec;
  const std::filesystem::path file(path);
  std::filesystem::create_directories(file.parent_path(), ec);
  const bool is_new = !std::filesystem::exists(file, ec);
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (f == nullptr) {
    return absl::InternalError(absl::StrCat("league: cannot append to ", path,
                                            ": ", std::strerror(errno)));
  }
  if (is_new) {
    std::fprintf(f,
                 "env_steps,learner_version,opponent_version,"
                 "learner_return\n");
  }
  for (const LeagueMatch& m : matches) {
    std::fprintf(f, "%lld,%lld,%lld,%g\n", static_cast<long long>(m.env_steps),
                 static_cast<long long>(m.learner_version),
                 static_cast<long long>(m.opponent_version), m.learner_return);
  }
  const bool failed = std::ferror(f) != 0;
  if (std::fclose(f) != 0 || failed) {
    return absl::InternalError(
        absl::StrCat("league: writing ", path, " failed"));
  }
  return absl::OkStatus();
}

}  // namespace rl
