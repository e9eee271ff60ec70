// Writes scalars into a new TensorBoard event file (or appends them to one
// it wrote before) and prints its path.
//
//   tfevents_write_tool --dir=runs/tb loss:0:1.5 loss:1:nan reward:1:-inf
//   tfevents_write_tool --append=runs/tb/events.out.tfevents.... loss:2:1
//
// Each argument is tag:step:value; the tag may itself contain ':' (the last
// two fields are the step and the value). Values accept nan, inf and -inf.
// Exit codes: 0 written, 2 bad arguments, 1 I/O error.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "telemetry/tfevents/tfevents_writer.h"

ABSL_FLAG(std::string, dir, "", "Directory for the event file (created).");
ABSL_FLAG(std::string, append, "",
          "Append to this event file (TfEventsWriter::Reopen) instead of "
          "creating one in --dir.");
ABSL_FLAG(std::string, wall_time_s, "",
          "Wall time of every scalar, in Unix seconds (default: the time each "
          "one is written).");

namespace {

struct ScalarArg {
  std::string tag;
  int64_t step = 0;
  float value = 0;
};

bool ParseScalar(absl::string_view arg, ScalarArg* out) {
  const size_t value_colon = arg.rfind(':');
  if (value_colon == absl::string_view::npos || value_colon == 0) return false;
  const size_t step_colon = arg.rfind(':', value_colon - 1);
  if (step_colon == absl::string_view::npos || step_colon == 0) return false;
  out->tag = std::string(arg.substr(0, step_colon));
  return absl::SimpleAtoi(
             arg.substr(step_colon + 1, value_colon - step_colon - 1),
             &out->step) &&
         absl::SimpleAtof(arg.substr(value_colon + 1), &out->value);
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  const std::string dir = absl::GetFlag(FLAGS_dir);
  const std::string append = absl::GetFlag(FLAGS_append);
  if (dir.empty() == append.empty()) {
    std::fprintf(stderr, "error: one of --dir and --append is required\n");
    return 2;
  }
  bool fixed_time = false;
  double wall_time_s = 0;
  if (const std::string flag = absl::GetFlag(FLAGS_wall_time_s);
      !flag.empty()) {
    if (!absl::SimpleAtod(flag, &wall_time_s)) {
      std::fprintf(stderr, "error: --wall_time_s=%s is not a number\n",
                   flag.c_str());
      return 2;
    }
    fixed_time = true;
  }
  std::vector<ScalarArg> scalars;
  for (size_t i = 1; i < args.size(); ++i) {
    ScalarArg scalar;
    if (!ParseScalar(args[i], &scalar)) {
      std::fprintf(stderr, "error: '%s' is not tag:step:value\n", args[i]);
      return 2;
    }
    scalars.push_back(std::move(scalar));
  }

  auto writer = append.empty() ? rl::TfEventsWriter::Create(dir)
                               : rl::TfEventsWriter::Reopen(append);
  if (!writer.ok()) {
    std::fprintf(stderr, "error: %s\n", writer.status().ToString().c_str());
    return 1;
  }
  for (const ScalarArg& s : scalars) {
    const double t = fixed_time
                         ? wall_time_s
                         : absl::FDivDuration(absl::Now() - absl::UnixEpoch(),
                                              absl::Seconds(1));
    if (absl::Status status = (*writer)->AddScalar(s.tag, s.step, t, s.value);
        !status.ok()) {
      std::fprintf(stderr, "error: %s\n", status.ToString().c_str());
      return 1;
    }
  }
  if (absl::Status status = (*writer)->Flush(); !status.ok()) {
    std::fprintf(stderr, "error: %s\n", status.ToString().c_str());
    return 1;
  }
  std::printf("%s\n", (*writer)->path().c_str());
  return 0;
}
