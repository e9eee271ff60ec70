// The fused CPU kernels (policy/fused_policy.h) acting for some rows of a
// batch: the rows' observations gathered into contiguous scratch, one
// fused Act over them, and the actions (log-probabilities and values where
// the caller keeps them) scattered back to those rows. The collector runs
// several policies' rows this way, and a league its frozen opponents'.
#ifndef RL_POLICY_FUSED_ROWS_H_
#define RL_POLICY_FUSED_ROWS_H_

#include <torch/torch.h>

#include <cstdint>

#include "absl/status/status.h"
#include "policy/actor_critic.h"
#include "policy/fused_policy.h"

namespace rl {

class FusedRows {
 public:
  // Binds the kernels to `policy`'s weights as they are now (again after a
  // publication replaced their storage).
  absl::Status Bind(ActorCritic& policy) { return kernels_.Bind(policy); }

  // Acts for `rows` ([K] int64) of `observations` ([E, O] float32, CPU):
  // writes those rows of `actions` ([E] int64 or [E, A] float32) and,
  // where defined, of `log_probs` and `values` ([E] float32); leaves every
  // other row as it was. Draws from `generator` as FusedPolicy::Act does
  // for the K gathered rows.
  void Act(const torch::Tensor& observations, const torch::Tensor& rows,
           at::CPUGeneratorImpl* generator, torch::Tensor actions,
           torch::Tensor log_probs = {}, torch::Tensor values = {});

 private:
  FusedPolicy kernels_;
  // Contiguous scratch of the last row count.
  torch::Tensor observations_, actions_, log_probs_, values_;
};

}  // namespace rl

#endif  // RL_POLICY_FUSED_ROWS_H_
