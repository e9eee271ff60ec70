// The seam between PpoUpdater's epoch loop (learner/ppo_updater.cc) and the
// ways a minibatch step computes: eager LibTorch (ppo_eager_step.h), replayed
// from a CUDA graph (ppo_graphed_step.h) or the fused CPU kernels
// (ppo_fused_step.h). The loop owns the order (epochs x minibatches), the KL
// early stop and its all-reduce; a strategy owns where the rollout lives, the
// step itself, the sums and their one read-back. Part of the ppo_updater
// library.
#ifndef RL_LEARNER_PPO_STEP_H_
#define RL_LEARNER_PPO_STEP_H_

#include <torch/types.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "learner/collective.h"
#include "learner/ppo_update_stats.h"
#include "policy/rollout.h"

namespace rl {

// What every strategy computes from first: GAE, the annealed rate (set on
// the optimizer), this rank's minibatch and its share of the global one.
struct UpdatePlan {
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
  // alone or without advantage normalisation. With agents that leave early
  // (rollout.alive), over the alive rows only.
  std::vector<double> advantage_moments;
  // A gang whose rows weigh by rollout.alive: minibatch m of epoch e's
  // alive rows over every rank at [e * num_minibatches + m], and this
  // rank's share of them (its gradient's weight; 0 where none is alive
  // anywhere, a minibatch every rank skips). Empty otherwise.
  std::vector<double> alive_counts;
  std::vector<double> alive_shares;
};

// A minibatch's advantage normalisation (mean, std) from a gang's plan.
std::pair<double, double> GangAdvantageMoments(const UpdatePlan& plan,
                                               int64_t index);

// What an update's epochs give back.
struct EpochResult {
  UpdateStats stats;
  // Minibatches whose loss or gradient was NaN or inf.
  int64_t non_finite = 0;
  torch::Tensor flat_observations;  // [T*E, obs]
};

// One way to run the minibatch steps of an update. Per update the loop
// calls BeginUpdate, then per epoch BeginEpoch, Step for each minibatch and
// (with ppo.target_kl) EpochKl, then Finish. LibTorch calls may throw
// (PpoUpdater::Update turns that into a Status); every other failure, a
// collective's included, is the returned Status.
class MinibatchStrategy {
 public:
  enum class Kind { kEager, kGraphed, kFused };

  virtual ~MinibatchStrategy() = default;
  // How the steps run now (a failed capture makes a graphed one eager).
  virtual Kind kind() const = 0;
  // This update's rollout where the steps read it; `collective` (not owned,
  // null alone) for the update's steps.
  virtual absl::Status BeginUpdate(const Rollout& rollout,
                                   const UpdatePlan& plan,
                                   Collective* collective) = 0;
  virtual void BeginEpoch(int epoch) = 0;
  // Minibatch `minibatch` of epoch `epoch`. Reads nothing back.
  virtual absl::Status Step(int epoch, int64_t minibatch) = 0;
  // The epoch's share-weighted KL sum, float64 [1], for the loop to
  // all-reduce and read back.
  virtual torch::Tensor EpochKl() = 0;
  // The update's statistics, read back once.
  virtual EpochResult Finish(const Rollout& rollout, const UpdatePlan& plan,
                             int64_t minibatches_run, int epochs) = 0;
};

}  // namespace rl

#endif  // RL_LEARNER_PPO_STEP_H_
