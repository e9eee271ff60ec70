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
// Kept for callers that use them through this header (AdamStateFor, ...).
#include "learner/fused_ppo.h"
#include "learner/multi_tensor_adam.h"
#include "learner/ppo_loss_terms.h"
#include "learner/ppo_step.h"
#include "learner/ppo_update_stats.h"
#include "learner/step_graph.h"
#include "policy/actor_critic.h"
#include "policy/rollout.h"
#include "proto/common.pb.h"

namespace rl {

// A central critic (policy.central_value) values whole environment copies,
// so the update shuffles rows copy by copy: a shuffled order of copies
// `copies` ([N / agents] int64) -> the order of their rows [N], each copy's
// `agents` rows together in agent order. `copies` itself for agents <= 1.
torch::Tensor WholeCopies(const torch::Tensor& copies, int64_t agents);

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
  // Updates with non-finite minibatches in a row so far; part of a
  // checkpoint (a resumed run goes on counting its streak).
  int consecutive_nonfinite_updates() const {
    return consecutive_nonfinite_updates_;
  }
  void set_consecutive_nonfinite_updates(int count) {
    consecutive_nonfinite_updates_ = std::max(0, count);
  }

  // Whether updates run on the fused CPU path (execution.cpu_kernels); known
  // after the first Update.
  bool fused() const {
    return strategy_ != nullptr &&
           strategy_->kind() == MinibatchStrategy::Kind::kFused;
  }
  // Whether the forward passes run in bfloat16 autocast (execution.precision on
  // the policy's device); known after the first Update.
  bool bfloat16() const { return bfloat16_; }
  // Whether each minibatch step is replayed from a CUDA graph
  // (execution.cuda_graphs); known after the first Update.
  bool cuda_graphs() const {
    return strategy_ != nullptr &&
           strategy_->kind() == MinibatchStrategy::Kind::kGraphed;
  }
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
  // Everything a gang must agree on before the first minibatch, in one
  // all-reduce (see Update): GAE, the annealed rate (set on the optimizer),
  // the minibatch orders. Sets gang_observation_moments_ in a gang that
  // normalises observations.
  absl::StatusOr<UpdatePlan> MakePlan(const Rollout& rollout,
                                      int64_t env_steps_done,
                                      std::vector<double>* gang_sums);
  // At the first update: the strategy that execution.* asks for (bfloat16,
  // the fused CPU path, CUDA graphs), or why it cannot be had; `weighted`:
  // the rollouts carry alive flags (the LibTorch step weighs the rows).
  absl::Status ChooseStrategy(bool weighted);
  // The update's epochs x minibatches over strategy_, with the early stop
  // on approximate KL. LibTorch calls may throw (Update turns that into a
  // Status); every other failure, a collective's included, is the returned
  // Status.
  absl::StatusOr<EpochResult> RunEpochs(const Rollout& rollout,
                                        const UpdatePlan& plan);
  // Whether the epoch's KL stops the update (ppo.target_kl; one read-back).
  absl::StatusOr<bool> StopForKl();

  ActorCritic policy_;
  PPOConfig config_;
  ExecutionConfig execution_;
  std::vector<LossTerm> loss_terms_;  // PpoLossTerms(config_)
  int64_t total_env_steps_;
  std::unique_ptr<torch::optim::Adam> optimizer_;
  at::Generator generator_;
  // Shuffles a rollout on a GPU, seeded from generator_ each update.
  at::Generator device_generator_;
  Collective* collective_ = nullptr;
  // A gang's all-reduced observation moments of the update in progress
  // (undefined alone or without observation normalisation).
  torch::Tensor gang_observation_moments_;
  int max_nonfinite_updates_ = 1;
  int consecutive_nonfinite_updates_ = 0;
  // How the minibatch steps compute (ppo_eager_step.h, ppo_graphed_step.h,
  // ppo_fused_step.h); chosen at the first update.
  std::unique_ptr<MinibatchStrategy> strategy_;
  bool bfloat16_ = false;  // execution.precision, set with strategy_
  bool deferred_graphs_for_testing_ = false;
  bool fail_capture_for_testing_ = false;
};

}  // namespace rl

#endif  // RL_LEARNER_PPO_UPDATER_H_
