#include "learner/segment_ledger.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <regex>
#include <tuple>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"

namespace rl {

bool SegmentKey::operator<(const SegmentKey& o) const {
  return std::tie(actor_id, incarnation, sequence_number) <
         std::tie(o.actor_id, o.incarnation, o.sequence_number);
}

bool SegmentKey::operator==(const SegmentKey& o) const {
  return actor_id == o.actor_id && incarnation == o.incarnation &&
         sequence_number == o.sequence_number;
}

std::string SegmentLedgerPath(const std::string& run_dir, int rank) {
  return absl::StrCat(run_dir, "/segments.rank", rank, ".log");
}

absl::StatusOr<SegmentLedger> SegmentLedger::Open(const std::string& path) {
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot open the segment ledger ", path, ": ", std::strerror(errno)));
  }
  return SegmentLedger(fd, path);
}

SegmentLedger::SegmentLedger(SegmentLedger&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      path_(std::move(other.path_)),
      failed_writes_(other.failed_writes_) {}

SegmentLedger& SegmentLedger::operator=(SegmentLedger&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
    failed_writes_ = other.failed_writes_;
  }
  return *this;
}

SegmentLedger::~SegmentLedger() {
  if (fd_ >= 0) ::close(fd_);
}

void SegmentLedger::Resume(int64_t updates) {
  Append(absl::StrCat("resume ", updates, "\n"));
}

void SegmentLedger::Update(int64_t updates,
                           const std::vector<SegmentKey>& segments) {
  std::string line = absl::StrCat("update ", updates);
  for (const SegmentKey& s : segments) {
    absl::StrAppend(&line, " ", s.actor_id, "/", absl::Hex(s.incarnation), "/",
                    s.sequence_number);
  }
  line += "\n";
  Append(line);
}

void SegmentLedger::Drop(const SegmentKey& s) {
  Append(absl::StrCat("drop ", s.actor_id, "/", absl::Hex(s.incarnation), "/",
                      s.sequence_number, "\n"));
}

void SegmentLedger::Append(const std::string& line) {
  const ssize_t n = ::write(fd_, line.data(), line.size());
  if (n == static_cast<ssize_t>(line.size())) return;
  if (failed_writes_++ == 0) {
    RL_LOG_WARNING("segment ledger {}: {} (later failures are only counted)",
                   path_, n < 0 ? std::strerror(errno) : "short write");
  }
}

namespace {

bool ParseKey(absl::string_view text, SegmentKey* key) {
  const std::vector<absl::string_view> parts = absl::StrSplit(text, '/');
  return parts.size() == 3 && absl::SimpleAtoi(parts[0], &key->actor_id) &&
         absl::SimpleHexAtoi(parts[1], &key->incarnation) &&
         absl::SimpleAtoi(parts[2], &key->sequence_number);
}

}  // namespace

SegmentLedgerAudit AuditSegmentLedger(absl::string_view text) {
  SegmentLedgerAudit audit;
  // The lineage: per update number, its segments.
  std::map<int64_t, std::vector<SegmentKey>> lineage;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    if (line.empty()) continue;
    const std::vector<absl::string_view> words =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (words.size() == 2 && words[0] == "drop") {
      SegmentKey key;
      if (ParseKey(words[1], &key)) {
        audit.processed.insert(key);
      } else {
        audit.violations.push_back(absl::StrCat(
            "line ", line_number, ": bad segment \"", words[1], "\""));
      }
      continue;
    }
    int64_t updates = 0;
    if (words.size() < 2 || !absl::SimpleAtoi(words[1], &updates) ||
        (words[0] != "resume" && words[0] != "update")) {
      audit.violations.push_back(
          absl::StrCat("line ", line_number, " is malformed: ", line));
      continue;
    }
    if (words[0] == "resume") {
      ++audit.resumes;
      const int64_t last = lineage.empty() ? 0 : lineage.rbegin()->first;
      if (updates > last) {
        audit.violations.push_back(
            absl::StrCat("line ", line_number, " resumes at update ", updates,
                         ", after only ", last, " updates were recorded"));
      }
      while (!lineage.empty() && lineage.rbegin()->first > updates) {
        lineage.erase(std::prev(lineage.end()));
        ++audit.rolled_back;
      }
      continue;
    }
    const int64_t expected = lineage.empty() ? 1 : lineage.rbegin()->first + 1;
    if (updates != expected) {
      audit.violations.push_back(absl::StrCat("line ", line_number,
                                              " records update ", updates,
                                              ", expected ", expected));
    }
    std::vector<SegmentKey>& segments = lineage[updates];
    for (size_t i = 2; i < words.size(); ++i) {
      SegmentKey key;
      if (!ParseKey(words[i], &key)) {
        audit.violations.push_back(absl::StrCat(
            "line ", line_number, ": bad segment \"", words[i], "\""));
        continue;
      }
      segments.push_back(key);
      audit.processed.insert(key);
    }
  }
  std::map<SegmentKey, int64_t> used_by;
  for (const auto& [update, segments] : lineage) {
    for (const SegmentKey& key : segments) {
      ++audit.segments;
      auto [it, inserted] = used_by.emplace(key, update);
      if (!inserted) {
        audit.violations.push_back(absl::StrCat(
            "segment ", key.sequence_number, " of actor ", key.actor_id,
            " (process ", absl::Hex(key.incarnation), ") was used by update ",
            it->second, " and again by update ", update));
      }
    }
  }
  audit.updates = lineage.empty() ? 0 : lineage.rbegin()->first;
  return audit;
}

std::vector<ActorAcknowledgement> ParseActorAcknowledgements(
    absl::string_view log, absl::string_view run_id) {
  static const std::regex kLine(
      R"(actor (\d+) of run (\S+) stopped \(.*\) \[process ([0-9a-f]+)\]: )"
      R"(.*acknowledged up to segment (\d+),)");
  std::vector<ActorAcknowledgement> out;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    std::cmatch m;
    if (!std::regex_search(line.data(), line.data() + line.size(), m, kLine) ||
        m[2].str() != run_id) {
      continue;
    }
    ActorAcknowledgement a;
    if (absl::SimpleAtoi(m[1].str(), &a.actor_id) &&
        absl::SimpleHexAtoi(m[3].str(), &a.incarnation) &&
        absl::SimpleAtoi(m[4].str(), &a.acknowledged)) {
      out.push_back(a);
    }
  }
  return out;
}

std::vector<std::string> CheckAcknowledged(
    const SegmentLedgerAudit& audit,
    const std::vector<ActorAcknowledgement>& acknowledgements) {
  std::vector<std::string> violations;
  for (const ActorAcknowledgement& a : acknowledgements) {
    int64_t missing = 0, first = 0;
    for (int64_t seq = 1; seq <= a.acknowledged; ++seq) {
      if (audit.processed.count({a.actor_id, a.incarnation, seq}) == 0) {
        if (missing++ == 0) first = seq;
      }
    }
    if (missing > 0) {
      violations.push_back(absl::StrCat(
          "actor ", a.actor_id, " (process ", absl::Hex(a.incarnation),
          ") saw segments up to ", a.acknowledged, " acknowledged, but ",
          missing, " of them (the first: ", first,
          ") were never used or dropped by a learner"));
    }
  }
  return violations;
}

}  // namespace rl
