// The segment ledger: an append-only text file in the run directory that
// says which rollout segments each update of a learner rank used, so that
// "no segment was used twice" can be checked from outside the learner (the
// chaos suite does, after killing learners mid-run).
//
//   resume <updates>                         a learner (re)started there
//   update <updates> <actor>/<incarnation>/<sequence> ...
//   drop <actor>/<incarnation>/<sequence>    stale: acknowledged, not used
//
// Each line is one write(2) to an O_APPEND descriptor, so a learner killed
// at any moment leaves whole lines. A resume at U rolls back every update
// after U: those updates were lost with the process (the checkpoint it
// resumed from is older), and their segments are used again legitimately
// only if they are sent again. Writes that fail (a full disk) are counted
// and logged once; the ledger is an audit trail, never a reason to stop.
#ifndef RL_LEARNER_SEGMENT_LEDGER_H_
#define RL_LEARNER_SEGMENT_LEDGER_H_

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rl {

// One rollout segment: which actor process sent it, and its number there.
struct SegmentKey {
  int actor_id = 0;
  uint64_t incarnation = 0;
  int64_t sequence_number = 0;
  bool operator<(const SegmentKey& o) const;
  bool operator==(const SegmentKey& o) const;
};

std::string SegmentLedgerPath(const std::string& run_dir, int rank);

class SegmentLedger {
 public:
  // Opens (creating) `path` for appending.
  static absl::StatusOr<SegmentLedger> Open(const std::string& path);
  SegmentLedger(SegmentLedger&& other) noexcept;
  SegmentLedger& operator=(SegmentLedger&& other) noexcept;
  SegmentLedger(const SegmentLedger&) = delete;
  SegmentLedger& operator=(const SegmentLedger&) = delete;
  ~SegmentLedger();

  void Resume(int64_t updates);
  void Update(int64_t updates, const std::vector<SegmentKey>& segments);
  void Drop(const SegmentKey& segment);
  int64_t failed_writes() const { return failed_writes_; }

 private:
  explicit SegmentLedger(int fd, std::string path)
      : fd_(fd), path_(std::move(path)) {}
  void Append(const std::string& line);

  int fd_ = -1;
  std::string path_;
  int64_t failed_writes_ = 0;
};

// What a ledger says about the updates that survive (the lineage: every
// update not rolled back by a later resume).
struct SegmentLedgerAudit {
  int64_t updates = 0;                  // in the lineage: 1..updates, no gaps
  int64_t segments = 0;                 // used by the lineage's updates
  int64_t resumes = 0;                  // resume lines
  int64_t rolled_back = 0;              // updates undone by a resume
  std::vector<std::string> violations;  // each names what is wrong
  // Every segment a learner used (in any update, rolled back or not) or
  // dropped as stale: the ones it may have acknowledged.
  std::set<SegmentKey> processed;
};

// Reads a ledger's text. Malformed lines, gaps or repeats in the update
// numbers, and a segment used twice in the lineage are violations.
SegmentLedgerAudit AuditSegmentLedger(absl::string_view text);

// What an actor process said it had acknowledged when it stopped (its log
// line "actor A of run R stopped (...) [process P]: ... acknowledged up to
// segment N, ..."; actors killed before that line say nothing).
struct ActorAcknowledgement {
  int actor_id = 0;
  uint64_t incarnation = 0;
  int64_t acknowledged = 0;  // segments 1..acknowledged
};
std::vector<ActorAcknowledgement> ParseActorAcknowledgements(
    absl::string_view log, absl::string_view run_id);

// Violations: a segment an actor saw acknowledged that no learner of the
// ledger used or dropped (acknowledged, then lost).
std::vector<std::string> CheckAcknowledged(
    const SegmentLedgerAudit& audit,
    const std::vector<ActorAcknowledgement>& acknowledgements);

}  // namespace rl

#endif  // RL_LEARNER_SEGMENT_LEDGER_H_
