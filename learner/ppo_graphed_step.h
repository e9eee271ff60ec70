// The CUDA-graphed minibatch strategy (execution.cuda_graphs): a small
// network's update is bound by the host launching its kernels
// (learner/multi_tensor_adam.h), and a replay launches the whole step at once.
// The step is the eager strategy's own (learner/ppo_minibatch.h); what changes
// is where it reads and writes: tensors that stay put from update to update,
// into which each update copies its rollout and each minibatch its rows, and
// Adam's rate as a device scalar. Part of the ppo_updater library.
#ifndef RL_LEARNER_PPO_GRAPHED_STEP_H_
#define RL_LEARNER_PPO_GRAPHED_STEP_H_

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "learner/collective.h"
#include "learner/ppo_eager_step.h"
#include "learner/ppo_minibatch.h"
#include "learner/ppo_step.h"
#include "learner/step_graph.h"
#include "policy/rollout.h"

namespace rl {

// What decides whether the minibatch step is graphed.
struct StepGraphRequest {
  std::string mode;  // execution.cuda_graphs: auto ("" too), on, off
  torch::Device device = torch::kCPU;
  bool gang = false;  // a collective is set
  bool recurrent = false;
  bool bfloat16 = false;
  bool fused = false;
  bool weighted = false;  // rollouts carry alive (env.agents_leave)
  // Tests: a DeferredStepGraph (a CUDA graph's semantics on any device).
  bool deferred_for_testing = false;
  bool fail_capture_for_testing = false;
};

// The graph to replay the step from, or null where the update runs
// without one. FAILED_PRECONDITION for `on` where the step cannot be
// captured, naming why.
absl::StatusOr<std::unique_ptr<StepGraph>> NewStepGraphFor(
    const StepGraphRequest& request);

class GraphedMinibatches : public MinibatchStrategy {
 public:
  // `graph` from NewStepGraphFor(request), not null.
  GraphedMinibatches(TorchMinibatchStep step, StepGraphRequest request,
                     std::unique_ptr<StepGraph> graph)
      : eager_(std::move(step)),
        request_(std::move(request)),
        graph_(std::move(graph)) {}

  Kind kind() const override {
    return graphed_ ? Kind::kGraphed : Kind::kEager;
  }
  absl::Status BeginUpdate(const Rollout& rollout, const UpdatePlan& plan,
                           Collective* collective) override;
  void BeginEpoch(int epoch) override;
  absl::Status Step(int epoch, int64_t minibatch) override;
  torch::Tensor EpochKl() override;
  EpochResult Finish(const Rollout& rollout, const UpdatePlan& plan,
                     int64_t minibatches_run, int epochs) override;

 private:
  // The addresses of the tensors the graph reads and writes (parameters,
  // gradients, Adam's moments, buffers): a checkpoint that moved any makes
  // a new graph.
  std::vector<const void*> GraphTensorAddresses();
  bool GraphTensorsMoved();

  // Runs whole updates the graph cannot (another rollout shape than the
  // captured one; every update after a capture failed under auto), and
  // owns the step.
  EagerMinibatches eager_;
  StepGraphRequest request_;
  bool graphed_ = true;         // false after a failed capture
  bool eager_updates_ = false;  // later updates through eager_
  bool delegating_ = false;     // this update through eager_
  // The graph of the minibatch step (kGraphWarmups steps run first on its
  // stream), the tensors it reads and writes, and the Adam generation it
  // was captured at.
  std::unique_ptr<StepGraph> graph_;
  StepTensors graph_tensors_;
  StepShape graph_shape_;
  int graph_warmups_ = 0;
  bool graph_captured_ = false;
  int64_t graph_generation_ = -1;
  absl::Status graph_step_status_;
  std::vector<const void*> graph_addresses_;
  // The update in progress.
  std::vector<torch::Tensor> orders_;
  Collective* collective_ = nullptr;
};

}  // namespace rl

#endif  // RL_LEARNER_PPO_GRAPHED_STEP_H_
