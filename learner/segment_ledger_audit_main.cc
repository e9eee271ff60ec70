// Audits segment ledgers (learner/segment_ledger.h): for each file given,
// prints its lineage's updates and segments, its resumes and rolled-back
// updates, and every violation (a segment used twice, a gap in the
// updates, a malformed line). Exits 1 if any file has a violation or
// cannot be read.
//
//   segment_ledger_audit runs/<run id>/segments.rank0.log ...
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "learner/segment_ledger.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s LEDGER...\n", argv[0]);
    return 2;
  }
  int bad = 0;
  for (int i = 1; i < argc; ++i) {
    std::ifstream in(argv[i]);
    if (!in) {
      std::fprintf(stderr, "%s: cannot be read\n", argv[i]);
      ++bad;
      continue;
    }
    const std::string text((std::istreambuf_iterator<char>(in)),
                           std::istreambuf_iterator<char>());
    const rl::SegmentLedgerAudit audit = rl::AuditSegmentLedger(text);
    std::printf(
        "%s: updates %lld, segments %lld, resumes %lld, rolled back %lld, "
        "violations %zu\n",
        argv[i], static_cast<long long>(audit.updates),
        static_cast<long long>(audit.segments),
        static_cast<long long>(audit.resumes),
        static_cast<long long>(audit.rolled_back), audit.violations.size());
    for (const std::string& v : audit.violations) {
      std::printf("  violation: %s\n", v.c_str());
    }
    if (!audit.violations.empty()) ++bad;
  }
  return bad == 0 ? 0 : 1;
}
