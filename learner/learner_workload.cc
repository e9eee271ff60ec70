#include "learner/learner_workload.h"

#include <utility>

#include "common/status.h"

namespace rl {

LearnerWorkload::LearnerWorkload(
    LearnerServiceImpl* service, Emitter* emitter,
    std::function<void(std::shared_ptr<LearnerCore>)> on_core)
    : service_(service), emitter_(emitter), on_core_(std::move(on_core)) {}

LearnerWorkload::~LearnerWorkload() { Stop(); }

void LearnerWorkload::SetCore(std::shared_ptr<LearnerCore> core) {
  core_ = core;
  service_->SetCore(core);
  if (on_core_) on_core_(std::move(core));
}

absl::Status LearnerWorkload::Start(const Assignment& assignment) {
  Stop();
  LearnerOptions options;
  options.spec = assignment.spec();
  options.run_id = assignment.run_id();
  options.run_dir = assignment.checkpoint_dir();
  options.emitter = emitter_;
  if (emitter_ != nullptr) emitter_->SetRun(assignment.run_id());
  ASSIGN_OR_RETURN(std::unique_ptr<LearnerCore> core,
                   LearnerCore::Create(options));
  SetCore(std::move(core));
  return absl::OkStatus();
}

WorkloadState LearnerWorkload::Poll() {
  WorkloadState state;
  if (core_ == nullptr) return state;
  state.finished = core_->WaitUntilDone(absl::ZeroDuration());
  state.status = core_->final_status();
  state.progress = core_->GetStatus().progress();
  return state;
}

void LearnerWorkload::Stop() {
  if (core_ != nullptr) SetCore(nullptr);
}

}  // namespace rl
