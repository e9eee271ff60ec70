// Adam's step for every parameter at once: at::_fused_adam_ (one
// multi-tensor kernel on CUDA, one vectorised pass on the CPU) instead of
// torch::optim::Adam::step's ~8 operations per parameter. On a GPU the
// update of a small network is bound by the host launching kernels (an
// H100 was busy 4.8% of a CartPole update), and Adam was a third of them.
//
// It works on torch::optim::Adam's own state (AdamParamState: step,
// exp_avg, exp_avg_sq), so checkpoints, the learning-rate schedule and a
// later torch::optim::Adam::step are unchanged. The step counts also live
// on the parameters' device, as at::_fused_adam_ reads them there; they are
// rebuilt from the host's whenever those changed (a checkpoint loaded).
#ifndef RL_LEARNER_MULTI_TENSOR_ADAM_H_
#define RL_LEARNER_MULTI_TENSOR_ADAM_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "torch/optim/adam.h"

namespace rl {

// `p`'s state in `optimizer`, created as Adam::step creates it on first use
// (step 0, zero moments).
torch::optim::AdamParamState& AdamStateFor(torch::optim::Adam& optimizer,
                                           const torch::Tensor& p);

// FAILED_PRECONDITION unless `optimizer` has one parameter group, no weight
// decay and no amsgrad (the steps here do neither).
absl::Status CheckPlainAdam(const torch::optim::Adam& optimizer);

class MultiTensorAdam {
 public:
  // `optimizer` outlives this.
  explicit MultiTensorAdam(torch::optim::Adam* optimizer)
      : optimizer_(optimizer) {}

  // One Adam step of every parameter from its .grad(), as
  // torch::optim::Adam::step takes it (to rounding). Parameters without a
  // gradient are refused: PPO's losses reach every parameter.
  // Step() = Prepare(), then StepKernels() at the optimizer's rate, then
  // CountStep().
  absl::Status Step();

  // The three parts of a step, for a step captured in a CUDA graph
  // (learner/step_graph.h): Prepare() (host: the states and the step
  // counts on the device, rebuilt where the host's changed; no gradient
  // needed yet) before the capture, StepKernels (device work only: counts + 1
  // and the fused Adam step at `lr`, a float32 scalar tensor on the parameters'
  // device, read when the kernel runs) inside it, CountStep() (the host's
  // counts + 1) after every run of it. generation() changes whenever Prepare
  // rebuilt the device's counts: a graph captured before then is stale.
  absl::Status Prepare();
  void StepKernels(const torch::Tensor& lr);
  void CountStep();
  int64_t generation() const { return generation_; }

 private:
  torch::optim::Adam* optimizer_;
  std::vector<torch::Tensor> device_steps_;  // float32 scalars
  std::vector<int64_t> host_steps_;          // what device_steps_ hold
  int64_t generation_ = 0;
};

}  // namespace rl

#endif  // RL_LEARNER_MULTI_TENSOR_ADAM_H_
