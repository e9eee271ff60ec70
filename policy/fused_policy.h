// The ActorCritic MLP evaluated straight from its parameters' memory, with
// no LibTorch dispatcher and no allocation per call: the fused CPU path for
// small batches (issue: PPO at CleanRL's 4 envs x 128 steps spends most of
// its time in per-operator dispatch of eager LibTorch, not arithmetic).
//
// The matrix products go to the BLAS inside LibTorch (sgemm_, MKL in the
// PyPI wheel, with its own run-time choice of SIMD), tanh and exp to MKL's
// vector math where present: well-kept kernels with run-time CPU dispatch,
// so no -march flag is needed. What is written here is the glue: the layer
// loop, the heads and the backward pass of the MLP, which no library offers
// without a dispatcher.
//
// LibTorch's ActorCritic stays the reference and the owner of the weights:
// a FusedPolicy reads (and the fused updater writes) the module's own
// parameter tensors, so checkpoints, publications and the LibTorch path see
// the same numbers. Bind() re-reads the parameter pointers; call it before
// each use after anything that may replace a parameter's storage (loading a
// checkpoint or a publication does).
#ifndef RL_POLICY_FUSED_POLICY_H_
#define RL_POLICY_FUSED_POLICY_H_

#include <ATen/CPUGeneratorImpl.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "policy/actor_critic.h"

namespace rl {

// "auto" (or ""), "fused" or "libtorch": execution.cpu_kernels of a run file.
// INVALID_ARGUMENT naming the field for anything else.
absl::Status CheckCpuKernels(const std::string& value);

// Whether a run with execution.cpu_kernels = `value` evaluates `policy` fused:
// "auto" when FusedPolicy supports it (logging the reason, once per
// process, when it steps aside), "fused" requires that support
// (FAILED_PRECONDITION with the reason otherwise), "libtorch" never.
absl::StatusOr<bool> UseFusedPolicy(const std::string& value,
                                    ActorCritic& policy);

class FusedPolicy {
 public:
  // Per-row values of one forward pass, kept for the backward pass. Sized
  // on demand and reused between calls.
  struct Activations {
    int64_t batch = 0;
    std::vector<float> input;  // [B, obs] normalised
    // A central critic's value input [B, agents x obs] (CentralInput of
    // `input`); empty otherwise.
    std::vector<float> central;
    std::vector<std::vector<float>> policy_hidden;  // per layer, after tanh
    std::vector<std::vector<float>> value_hidden;   // empty: shared trunk
    std::vector<float> head;    // [B, head]: logits or Gaussian means
    std::vector<float> values;  // [B]
  };

  // The action heads (policy/action_head.h) the fused path computes by
  // hand; it steps aside for any other.
  static const std::vector<std::string>& Heads();

  // OK if `policy` can run fused here: CPU float32 contiguous parameters
  // and buffers, one of Heads() (Discrete or Box), an MLP (with or without
  // a central critic), and a LibTorch with a BLAS. Else
  // FAILED_PRECONDITION with the reason.
  static absl::Status Supported(ActorCritic& policy);

  // (Re)binds to `policy`'s parameters; checked as by Supported.
  absl::Status Bind(ActorCritic& policy);

  bool discrete() const { return num_actions_ > 0; }
  int observation_size() const { return observation_size_; }
  int head_size() const { return head_size_; }
  // A central critic's agents per environment copy (policy.central_value),
  // else 1: every batch given to Forward, Act, Values and a loss is whole
  // copies of this many rows (row c x agents + k is agent k of copy c).
  int central_agents() const { return central_agents_; }
  // Parameters in policy->parameters() order, with their sizes: the layout
  // of every flat gradient below.
  const std::vector<std::pair<float*, int64_t>>& parameters() const {
    return parameters_;
  }
  int64_t num_parameters() const { return num_parameters_; }
  // The Gaussian head's log-std [action_size] (null if discrete).
  const float* log_std() const { return log_std_; }
  // Offset of log_std's gradient in a flat gradient (-1 if discrete).
  int64_t log_std_offset() const { return log_std_offset_; }

  // Forward pass over `batch` rows of raw observations [batch, obs]: the
  // policy head only if `policy`, the value head only if `value`. A central
  // critic's batch is whole copies (else c10::Error, as CentralInput).
  void Forward(const float* observations, int64_t batch, bool policy,
               bool value, Activations* acts) const;

  // Samples one action per row (argmax / mean if `deterministic`), with
  // its log-probability and the value estimate: int64 `actions` [batch]
  // (discrete) or float [batch, action_size]. Draws from `generator`
  // (categorical: one uniform per row by inverse CDF; Gaussian: one normal
  // per component), so a seeded generator gives a reproducible rollout.
  void Act(const float* observations, int64_t batch,
           at::CPUGeneratorImpl* generator, bool deterministic, void* actions,
           float* log_probs, float* values);

  // Value estimates [batch] of raw observations.
  void Values(const float* observations, int64_t batch, float* values);

  // Gradients of a loss with respect to every parameter, written (not
  // added) into `grads` [num_parameters()], given the loss's gradient with
  // respect to the head outputs [B, head] and the values [B] of `acts`.
  // log_std's gradient is left for the caller (it does not flow through
  // the network).
  // With `accumulate`, the gradients are added to `grads` instead (a
  // minibatch done in chunks of rows).
  void Backward(const Activations& acts, const float* d_head,
                const float* d_values, float* grads, bool accumulate = false);

 private:
  struct Linear {
    const float* weight = nullptr;  // [out, in] row-major
    const float* bias = nullptr;    // [out]
    int in = 0;
    int out = 0;
    int64_t weight_offset = 0;  // in a flat gradient
    int64_t bias_offset = 0;
  };
  void Trunk(const std::vector<Linear>& layers, const float* input,
             int64_t batch, std::vector<std::vector<float>>* hidden) const;
  void TrunkBackward(const std::vector<Linear>& layers, const float* input,
                     const std::vector<std::vector<float>>& hidden,
                     int64_t batch, std::vector<float>* d_features,
                     float* grads, bool accumulate);

  // acts->central from acts->input: each row's copy, its own row first.
  void GatherCentral(Activations* acts) const;

  int observation_size_ = 0;
  int central_agents_ = 1;
  int num_actions_ = 0;
  int action_size_ = 0;
  int head_size_ = 0;
  bool shared_trunk_ = false;
  bool normalize_ = false;
  float observation_clip_ = 0;
  const float* obs_mean_ = nullptr;
  const float* obs_var_ = nullptr;
  std::vector<Linear> policy_trunk_;
  std::vector<Linear> value_trunk_;
  Linear policy_head_;
  Linear value_head_;
  const float* log_std_ = nullptr;
  int64_t log_std_offset_ = -1;
  std::vector<std::pair<float*, int64_t>> parameters_;
  int64_t num_parameters_ = 0;
  Activations act_scratch_;  // Act / Values
  std::vector<float> d_policy_, d_value_, d_tmp_,
      narrow_scratch_;  // Backward scratch
};

}  // namespace rl

#endif  // RL_POLICY_FUSED_POLICY_H_
