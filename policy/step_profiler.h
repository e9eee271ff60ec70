// A profile on demand: LibTorch's profiler (Kineto) records the operators
// of N steps of a loop (updates, segments) on the calling thread, and the
// CUDA kernels and copies where the device is a GPU, into a Chrome trace
// JSON file that Perfetto (ui.perfetto.dev) and chrome://tracing open.
#ifndef RL_POLICY_STEP_PROFILER_H_
#define RL_POLICY_STEP_PROFILER_H_

#include <string>

#include "absl/status/status.h"

namespace rl {

class StepProfiler {
 public:
  // Records `steps` steps (0: off) into `path`, with CUDA activity where
  // `cuda`.
  StepProfiler(std::string path, int steps, bool cuda = false);
  ~StepProfiler();  // Finish(), its error logged

  // Call before each step: starts recording before the first, and after
  // `steps` steps stops and writes the trace.
  absl::Status BeforeStep();
  // Stops and writes the trace if it is still recording (the loop ended
  // early); OK when there is nothing to write.
  absl::Status Finish();

  bool recording() const { return recording_; }
  int steps_recorded() const { return recorded_; }

 private:
  absl::Status Stop();  // stops recording and writes the trace

  std::string path_;
  int steps_;
  bool cuda_;
  bool recording_ = false;
  bool done_ = false;
  int recorded_ = 0;
};

}  // namespace rl

#endif  // RL_POLICY_STEP_PROFILER_H_
