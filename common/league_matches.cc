#include "common/league_matches.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace rl {
namespace {

constexpr char kHeader[] =
    "env_steps,learner_version,opponent_version,learner_return";

}  // namespace

absl::Status AppendLeagueMatches(const std::string& path,
                                 const std::vector<LeagueMatch>& matches) {
  std::error_code ec;
  const std::filesystem::path file(path);
  std::filesystem::create_directories(file.parent_path(), ec);
  // New, or left empty by a crash before its header: the header first.
  const bool is_new = !std::filesystem::exists(file, ec) ||
                      std::filesystem::file_size(file, ec) == 0;
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (f == nullptr) {
    return absl::InternalError(absl::StrCat("league: cannot append to ", path,
                                            ": ", std::strerror(errno)));
  }
  if (is_new) {
    std::fprintf(f, "%s\n", kHeader);
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

absl::StatusOr<std::vector<LeagueMatch>> ReadLeagueMatches(
    const std::string& path, int64_t* torn_bytes) {
  if (torn_bytes != nullptr) *torn_bytes = 0;
  std::vector<LeagueMatch> out;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return out;
    return absl::InternalError(
        absl::StrCat("league: cannot read ", path, ": ", std::strerror(errno)));
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  // After the last newline: empty, or a line whose write was cut short.
  if (torn_bytes != nullptr) {
    *torn_bytes = static_cast<int64_t>(lines.back().size());
  }
  lines.pop_back();
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string where = absl::StrCat(path, ":", i + 1);
    if (i == 0) {
      if (lines[0] != kHeader) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": expected the header ", kHeader, ", got \"",
                         absl::CEscape(lines[0]), "\""));
      }
      continue;
    }
    const std::vector<absl::string_view> fields = absl::StrSplit(lines[i], ',');
    LeagueMatch m;
    if (fields.size() != 4 || !absl::SimpleAtoi(fields[0], &m.env_steps) ||
        !absl::SimpleAtoi(fields[1], &m.learner_version) ||
        !absl::SimpleAtoi(fields[2], &m.opponent_version) ||
        !absl::SimpleAtof(fields[3], &m.learner_return)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": not a match: \"", absl::CEscape(lines[i]),
                       "\" (env_steps,learner_version,opponent_version,"
                       "learner_return)"));
    }
    out.push_back(m);
  }
  return out;
}

}  // namespace rl
