#include "learner/step_graph.h"

#include "absl/strings/str_cat.h"
#include "policy/cuda_runtime.h"

namespace rl {
namespace {

class DeferredStepGraph final : public StepGraph {
 public:
  absl::Status Warm(const std::function<void()>& step) override {
    step();
    return absl::OkStatus();
  }
  absl::Status Capture(const std::function<void()>& step) override {
    if (step_) return absl::FailedPreconditionError("captured already");
    step_ = step;
    return absl::OkStatus();
  }
  absl::Status Replay() override {
    if (!step_) return absl::FailedPreconditionError("nothing captured");
    step_();
    return absl::OkStatus();
  }

 private:
  std::function<void()> step_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<StepGraph>> NewCudaStepGraph() {
  absl::StatusOr<void*> entry =
      LoadGpuExtension(kCudaGraphLibrary, kCudaGraphEntry);
  if (!entry.ok()) return entry.status();
  StepGraph* graph = reinterpret_cast<NewCudaStepGraphFn>(*entry)();
  if (graph == nullptr) {
    return absl::InternalError(absl::StrCat(kCudaGraphEntry, " failed"));
  }
  return std::unique_ptr<StepGraph>(graph);
}

std::unique_ptr<StepGraph> NewDeferredStepGraph() {
  return std::make_unique<DeferredStepGraph>();
}

}  // namespace rl
