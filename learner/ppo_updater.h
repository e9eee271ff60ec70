// One PPO update over a rollout: GAE -> advantage normalisation -> epochs x
// minibatches of the clipped surrogate (+ optional value clipping, entropy
// bonus), Adam with linear learning-rate annealing, global gradient-norm
// clipping, optional early stop on approximate KL.
//
// Numbers are read back to the host once before (the rollout's values are
// checked: finite, actions in range), once per epoch (the KL check) and once
// at the end (the reported statistics, with a count of the minibatches
// whose loss or gradient was not finite); nothing else synchronises.
//
// Errors are Statuses, never exceptions: a rollout of the wrong shape or
// dtype, or with NaN/inf in it, is INVALID_ARGUMENT naming the tensor (and
// nothing is changed). A loss or gradient that turns non-finite (NaN, or
// inf from an exploding loss or gradient) skips those minibatches: their
// gradients are zeroed, so the weights stay finite, the normaliser is left
// as it was, and the update reports them in `nonfinite_minibatches`; the
// `max_nonfinite_updates`-th such update in a row is INTERNAL (the
// optimisation diverged).
//
// Data-parallel: with a Collective of L ranks, each rank updates from its
// own share of the rollouts and the ranks compute the update one learner
// would compute on their union: gradients are all-reduced (one flat bucket
// per minibatch, weighted by each rank's share of the minibatch), and
// advantage normalisation, the KL early stop, the non-finite check and the
// observation statistics use global sums. Ranks must start from the same
// parameters, optimizer state and shuffling stream (the learner broadcasts
// rank 0's); each rank's minibatches are its own rows shuffled by that
// stream, so with one minibatch per epoch the result equals one learner's
// on the concatenated rollout. A collective failure is its Status (ABORTED
// for a lost peer), and the update is abandoned on every rank.
#ifndef RL_LEARNER_PPO_UPDATER_H_
#define RL_LEARNER_PPO_UPDATER_H_

#include <torch/optim/adam.h>
#include <torch/types.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "learner/collective.h"
#include "learner/fused_ppo.h"
#include "learner/multi_tensor_adam.h"
#include "learner/ppo_loss_terms.h"
#include "learner/step_graph.h"
#include "policy/actor_critic.h"
#include "policy/rollout.h"
#include "proto/common.pb.h"

namespace rl {

// Reported per update.
struct UpdateStats {
  double policy_loss = 0;
  double value_loss = 0;
  double entropy = 0;
  double approx_kl = 0;
  double clip_fraction = 0;
  double explained_variance = 0;
  double grad_norm = 0;
  double learning_rate = 0;
  int epochs = 0;          // epochs run (fewer than configured after a KL stop)
  double gae_seconds = 0;  // wall time of the advantage computation
  // Minibatches whose loss or gradient was NaN or inf: their gradients were
  // not applied, and the observation statistics were not updated (the
  // losses and gradient norm above include them, so they are not finite).
  int64_t nonfinite_minibatches = 0;
  // Updates in a row, this one included, with such minibatches.
  int consecutive_nonfinite_updates = 0;
};

class PpoUpdater {
 public:
  // `total_env_steps` is the annealing horizon; `execution` says how the
  // update computes (kernels, precision, CUDA graphs; each "" is "auto").
  PpoUpdater(ActorCritic policy, const PPOConfig& config,
             int64_t total_env_steps, uint64_t seed,
             const ExecutionConfig& execution);

  // Updates the policy from `rollout` (collected by the policy as it is
  // now). `env_steps_done` (before this rollout) sets the annealed rate.
  // Afterwards folds the rollout's observations into the normaliser.
  //
  // In a gang, the update's scalars (minibatch sizes, every epoch's
  // advantage moments, observation moments) cross the wire in one planning
  // all-reduce before the first minibatch, so an update costs one
  // all-reduce per minibatch plus one (plus one per epoch with
  // ppo.target_kl). `gang_sums`, if given, rides in it: summed over the
  // gang in place (alone: left as it is).
  absl::StatusOr<UpdateStats> Update(const Rollout& rollout,
                                     int64_t env_steps_done,
                                     std::vector<double>* gang_sums = nullptr);

  // Train as one rank of `collective` (not owned; null: alone).
  void set_collective(Collective* collective) { collective_ = collective; }
  // The number of updates in a row with non-finite minibatches that makes
  // Update fail (INTERNAL); the ones before are skipped and reported.
  // Default 1: the first one fails. Values below 1 mean 1.
  void set_max_nonfinite_updates(int max) {
    max_nonfinite_updates_ = std::max(1, max);
  }

  // Whether updates run on the fused CPU path (execution.cpu_kernels); known
  // after the first Update.
  bool fused() const { return fused_ != nullptr; }
  // Whether the forward passes run in bfloat16 autocast (execution.precision on
  // the policy's device); known after the first Update.
  bool bfloat16() const { return bfloat16_; }
  // Whether each minibatch step is replayed from a CUDA graph
  // (execution.cuda_graphs); known after the first Update.
  bool cuda_graphs() const { return graphed_; }
  // Tests: minibatch steps through a DeferredStepGraph (a CUDA graph's
  // semantics on any device) as execution.cuda_graphs would on CUDA. Before the
  // first Update.
  void UseDeferredGraphsForTesting(bool fail_capture = false) {
    deferred_graphs_for_testing_ = true;
    fail_capture_for_testing_ = fail_capture;
  }

  torch::optim::Adam& optimizer() { return *optimizer_; }
  // Minibatch shuffling stream; part of a checkpoint.
  at::Generator& generator() { return generator_; }

 private:
  // What both paths compute first: GAE, the annealed rate (set on the
  // optimizer), this rank's minibatch and its share of the global one.
  struct Plan {
    torch::Tensor advantages;  // [T*E]
    torch::Tensor returns;     // [T*E]
    double lr = 0;
    double gae_seconds = 0;
    int64_t minibatch = 0;
    int64_t global_minibatch = 0;
    double share = 1;
    // Every epoch's minibatch order, drawn up front (in epoch order, so
    // the shuffling stream is as if drawn epoch by epoch).
    std::vector<torch::Tensor> orders;
    // A gang's global advantage sum and sum of squares of minibatch m of
    // epoch e at [2 * (e * num_minibatches + m)] and the next index; empty
    // alone or without advantage normalisation.
    std::vector<double> advantage_moments;
  };
  // Everything a gang must agree on before the first minibatch, in one
  // all-reduce (see Update). Sets gang_observation_moments_ in a gang that
  // normalises observations.
  absl::StatusOr<Plan> MakePlan(const Rollout& rollout, int64_t env_steps_done,
                                std::vector<double>* gang_sums);
  // A minibatch's advantage normalisation (mean, std) from the plan.
  static std::pair<double, double> GangAdvantageMoments(const Plan& plan,
                                                        int64_t index);
  // What an update's epochs give back.
  struct EpochResult {
    UpdateStats stats;
    // Minibatches whose loss or gradient was NaN or inf.
    int64_t non_finite = 0;
    torch::Tensor flat_observations;  // [T*E, obs]
  };
  // An update's epochs over a planned rollout, behind one signature: the
  // eager LibTorch path (RunEpochs) or the fused CPU path
  // (RunEpochsFused, policy/fused_policy.h), chosen at the first update
  // (epochs_). LibTorch calls may throw (Update turns that into a Status);
  // every other failure, a collective's included, is the returned Status.
  using EpochLoop = absl::StatusOr<EpochResult> (PpoUpdater::*)(
      const Rollout& rollout, const Plan& plan);
  absl::StatusOr<EpochResult> RunEpochs(const Rollout& rollout,
                                        const Plan& plan);
  // The same with each minibatch step replayed from a CUDA graph
  // (execution.cuda_graphs; learner/ppo_graph.cc).
  absl::StatusOr<EpochResult> RunEpochsGraphed(const Rollout& rollout,
                                               const Plan& plan);
  // Whether to graph (execution.cuda_graphs: auto, on, off) and the graph; at
  // the first update. FAILED_PRECONDITION for `on` where the step cannot be
  // captured, naming why.
  absl::StatusOr<bool> UseCudaGraphs();

  // The tensors one minibatch step reads, and the sums it adds to: the
  // update's own (RunEpochs), or a graph's, which stay put from update to
  // update (RunEpochsGraphed: a replay reads and writes where the capture
  // did).
  struct StepTensors {
    // The rollout on the device: [T*E, ...] rows.
    torch::Tensor obs, actions, old_log_probs, old_values, masks, advantages,
        returns;
    torch::Tensor episode_ends, initial_state;  // recurrent policies
    torch::Tensor idx;  // [minibatch]: this minibatch's rows
    torch::Tensor lr;   // graphs: Adam's rate, a device scalar
    // Sums over the update's minibatches (epoch_kl: the epoch's).
    torch::Tensor sum_policy_loss, sum_value_loss, sum_entropy, sum_kl,
        sum_clip, sum_grad_norm, sum_non_finite, epoch_kl;
  };
  // The sizes a minibatch step works with, fixed for a run.
  struct StepShape {
    int64_t steps = 0;  // T
    int64_t minibatch = 0;
    int64_t global_minibatch = 0;
    int64_t envs_per_minibatch = 0;  // recurrent: whole env sequences
    double share = 1;                // of a gang's global minibatch
  };
  StepTensors DeviceRollout(const Rollout& rollout, const Plan& plan,
                            std::vector<torch::Tensor>* orders);
  void ZeroSums(StepTensors& t) const;
  StepShape ShapeOf(const Rollout& rollout, const Plan& plan) const;
  // One minibatch (rows t.idx): forward, loss, backward, the gang's
  // all-reduce (advantage moments from `gang_plan`'s entry `index`),
  // clipping, non-finite zeroing, Adam (`graphed`: its device work only,
  // at t.lr), the sums. Reads nothing back.
  absl::Status MinibatchStep(StepTensors& t, const StepShape& shape,
                             const Plan* gang_plan, int64_t index,
                             bool graphed);
  // Whether the epoch's KL (its sum in `epoch_kl`) stops the update
  // (ppo.target_kl; one read-back).
  absl::StatusOr<bool> StopForKl(const torch::Tensor& epoch_kl);
  // The update's statistics, read back once.
  EpochResult Result(const StepTensors& t, const Plan& plan,
                     int64_t minibatches_run, int epochs) const;
  absl::StatusOr<EpochResult> RunEpochsFused(const Rollout& rollout,
                                             const Plan& plan);
  struct FusedBuffers {
    std::vector<float> observations, actions, old_log_probs, old_values,
        advantages, returns, grads;
    std::vector<int64_t> discrete_actions;
  };

  ActorCritic policy_;
  PPOConfig config_;
  ExecutionConfig execution_;
  std::vector<LossTerm> loss_terms_;  // PpoLossTerms(config_)
  int64_t total_env_steps_;
  std::unique_ptr<torch::optim::Adam> optimizer_;
  MultiTensorAdam adam_{optimizer_.get()};  // the LibTorch path's steps
  at::Generator generator_;
  // Shuffles a rollout on a GPU, seeded from generator_ each update.
  at::Generator device_generator_;
  Collective* collective_ = nullptr;
  // A gang's all-reduced observation moments of the update in progress
  // (undefined alone or without observation normalisation).
  torch::Tensor gang_observation_moments_;
  int max_nonfinite_updates_ = 1;
  int consecutive_nonfinite_updates_ = 0;
  EpochLoop epochs_ = nullptr;  // set at the first update
  bool bfloat16_ = false;       // execution.precision, set with epochs_
  // execution.cuda_graphs, decided with epochs_: the graph of the minibatch
  // step (kGraphWarmups steps run first on its stream), the tensors it reads
  // and writes, and the Adam generation it was captured at.
  bool graphed_ = false;
  bool deferred_graphs_for_testing_ = false;
  bool fail_capture_for_testing_ = false;
  std::unique_ptr<StepGraph> graph_;
  StepTensors graph_tensors_;
  StepShape graph_shape_;
  int graph_warmups_ = 0;
  bool graph_captured_ = false;
  int64_t graph_generation_ = -1;
  absl::Status graph_step_status_;
  // The addresses of the tensors the graph reads and writes (parameters,
  // gradients, Adam's moments, buffers) at its capture: a checkpoint that
  // moved any makes a new graph.
  std::vector<const void*> graph_addresses_;
  std::vector<const void*> GraphTensorAddresses();
  bool GraphTensorsMoved();
  std::unique_ptr<FusedPolicy> fused_;  // null: the LibTorch path
  std::unique_ptr<FusedPpoLoss> fused_loss_;
  std::unique_ptr<FusedBuffers> fused_buffers_;
};

}  // namespace rl

#endif  // RL_LEARNER_PPO_UPDATER_H_
