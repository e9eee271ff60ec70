#include "policy/step_profiler.h"

#include <torch/csrc/autograd/profiler_kineto.h>

#include <filesystem>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"
#include "policy/torch_status.h"

namespace rl {
namespace {

namespace prof = torch::profiler::impl;

std::set<prof::ActivityType> Activities(bool cuda) {
  std::set<prof::ActivityType> activities = {prof::ActivityType::CPU};
  if (cuda) activities.insert(prof::ActivityType::CUDA);
  return activities;
}

}  // namespace

StepProfiler::StepProfiler(std::string path, int steps, bool cuda)
    : path_(std::move(path)), steps_(steps), cuda_(cuda) {}

StepProfiler::~StepProfiler() {
  const absl::Status status = Finish();
  if (!status.ok()) {
    RL_LOG_ERROR("profile: {}", std::string(status.message()));
  }
}

absl::Status StepProfiler::BeforeStep() {
  if (steps_ <= 0 || done_) return absl::OkStatus();
  if (!recording_) {
    RETURN_IF_ERROR(CatchTorchErrors("starting the profiler", [&] {
      const prof::ProfilerConfig config(prof::ProfilerState::KINETO,
                                        /*report_input_shapes=*/true);
      torch::autograd::profiler::prepareProfiler(config, Activities(cuda_));
      torch::autograd::profiler::enableProfiler(config, Activities(cuda_));
    }));
    recording_ = true;
    return absl::OkStatus();
  }
  if (++recorded_ >= steps_) return Stop();
  return absl::OkStatus();
}

absl::Status StepProfiler::Finish() {
  if (!recording_) return absl::OkStatus();
  ++recorded_;  // the step in progress ended with the loop
  return Stop();
}

absl::Status StepProfiler::Stop() {
  recording_ = false;
  done_ = true;
  RETURN_IF_ERROR(
      CatchTorchErrors(absl::StrCat("writing the profile to ", path_), [&] {
        std::unique_ptr<torch::autograd::profiler::ProfilerResult> result =
            torch::autograd::profiler::disableProfiler();
        result->save(path_);
      }));
  // Kineto logs a file it cannot write and goes on.
  std::error_code ec;
  if (std::filesystem::file_size(path_, ec) == 0 || ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("the profile could not be written to ", path_,
                     ec ? absl::StrCat(": ", ec.message()) : ""));
  }
  RL_LOG_INFO(
      "profile of {} steps written to {} (open it in "
      "ui.perfetto.dev)",
      recorded_, path_);
  return absl::OkStatus();
}

}  // namespace rl
