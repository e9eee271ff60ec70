// A learner worker's workload: one LearnerCore per assignment, served
// through the process's LearnerService. Its progress and its end (budget
// used, target reached, or the error that stopped PPO) are what the worker
// runtime reports to the coordinator.
#ifndef RL_LEARNER_LEARNER_WORKLOAD_H_
#define RL_LEARNER_LEARNER_WORKLOAD_H_

#include <functional>
#include <memory>

#include "learner/learner_core.h"
#include "learner/learner_service.h"
#include "telemetry/emitter.h"
#include "worker/workload.h"

namespace rl {

class LearnerWorkload : public Workload {
 public:
  // `service` and `emitter` (may be null) must outlive this. `on_core` (may
  // be empty) is told of every core started or stopped (null), e.g. for
  // /metrics.
  LearnerWorkload(
      LearnerServiceImpl* service, Emitter* emitter,
      std::function<void(std::shared_ptr<LearnerCore>)> on_core = nullptr);
  ~LearnerWorkload() override;

  absl::Status Start(const Assignment& assignment) override;
  WorkloadState Poll() override;
  void Stop() override;

 private:
  void SetCore(std::shared_ptr<LearnerCore> core);

  LearnerServiceImpl* const service_;
  Emitter* const emitter_;
  const std::function<void(std::shared_ptr<LearnerCore>)> on_core_;
  std::shared_ptr<LearnerCore> core_;
};

}  // namespace rl

#endif  // RL_LEARNER_LEARNER_WORKLOAD_H_
