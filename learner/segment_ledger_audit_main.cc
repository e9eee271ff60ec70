// Audits segment ledgers (learner/segment_ledger.h): for each file given,
// prints its lineage's updates and segments, its resumes and rolled-back
// updates, and every violation (a segment used twice, a gap in the
// updates, a malformed line). With --run_id and --actor_log files, also
// checks that every segment the run's actor processes reported (when they
// stopped) as acknowledged was used or dropped by a learner. Exits 1 if
// any check fails or a file cannot be read.
//
//   segment_ledger_audit runs/<id>/segments.rank0.log ...
//       [--run_id=<id> --actor_log=logs/actor-0.log ...]
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "learner/segment_ledger.h"

namespace {

bool Read(const std::string& path, std::string* text) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "%s: cannot be read\n", path.c_str());
    return false;
  }
  text->assign(std::istreambuf_iterator<char>(in),
               std::istreambuf_iterator<char>());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> ledgers, actor_logs;
  std::string run_id;
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (absl::ConsumePrefix(&arg, "--run_id=")) {
      run_id = std::string(arg);
    } else if (absl::ConsumePrefix(&arg, "--actor_log=")) {
      actor_logs.emplace_back(arg);
    } else if (absl::StartsWith(arg, "--")) {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    } else {
      ledgers.emplace_back(arg);
    }
  }
  if (ledgers.empty() || (!actor_logs.empty() && run_id.empty())) {
    std::fprintf(stderr,
                 "usage: %s LEDGER... [--run_id=ID --actor_log=FILE...]\n",
                 argv[0]);
    return 2;
  }
  int bad = 0;
  // Segments any rank processed, from all the ledgers together.
  rl::SegmentLedgerAudit processed;
  for (const std::string& path : ledgers) {
    std::string text;
    if (!Read(path, &text)) {
      ++bad;
      continue;
    }
    const rl::SegmentLedgerAudit audit = rl::AuditSegmentLedger(text);
    processed.processed.insert(audit.processed.begin(), audit.processed.end());
    std::printf(
        "%s: updates %lld, segments %lld, resumes %lld, rolled back %lld, "
        "violations %zu\n",
        path.c_str(), static_cast<long long>(audit.updates),
        static_cast<long long>(audit.segments),
        static_cast<long long>(audit.resumes),
        static_cast<long long>(audit.rolled_back), audit.violations.size());
    for (const std::string& v : audit.violations) {
      std::printf("  violation: %s\n", v.c_str());
    }
    if (!audit.violations.empty()) ++bad;
  }
  if (!actor_logs.empty()) {
    std::vector<rl::ActorAcknowledgement> acks;
    for (const std::string& path : actor_logs) {
      std::string text;
      if (!Read(path, &text)) {
        ++bad;
        continue;
      }
      for (const auto& a : rl::ParseActorAcknowledgements(text, run_id)) {
        acks.push_back(a);
      }
    }
    long long acknowledged = 0;
    for (const auto& a : acks) acknowledged += a.acknowledged;
    const std::vector<std::string> lost =
        rl::CheckAcknowledged(processed, acks);
    std::printf(
        "actor reports %zu, segments acknowledged %lld, acknowledged then "
        "lost %zu\n",
        acks.size(), acknowledged, lost.size());
    for (const std::string& v : lost)
      std::printf("  violation: %s\n", v.c_str());
    if (!lost.empty()) ++bad;
  }
  return bad == 0 ? 0 : 1;
}
