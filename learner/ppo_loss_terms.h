// PPO's loss as a list of named terms, built once from a run's PPOConfig:
//   loss = sum over terms of coefficient x term
// The LibTorch update (ppo_minibatch.cc) adds the terms of this list, and
// the fused CPU path (fused_ppo.h) says for each kind whether it
// implements it (FusedImplements): a term it does not implement makes
// execution.cpu_kernels auto step aside for LibTorch (logged) and fused
// fail, so no term is ever dropped silently. A kind added here without a
// word from the fused path fails //learner:ppo_loss_terms_test.
#ifndef RL_LEARNER_PPO_LOSS_TERMS_H_
#define RL_LEARNER_PPO_LOSS_TERMS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "proto/common.pb.h"

namespace rl {

enum class LossTermKind {
  kClippedSurrogate,  // -min(r A, clip(r, 1 - eps, 1 + eps) A), mean
  kValue,             // 0.5 (V - R)^2, mean
  kClippedValue,      // 0.5 max((V - R)^2, (V_old + clip(V - V_old) - R)^2)
  kEntropyBonus,      // mean entropy (its coefficient is -entropy_coef)
  kCount,             // not a term: the number of kinds
};

// "clipped_surrogate", "value", "clipped_value", "entropy_bonus".
const char* LossTermName(LossTermKind kind);

struct LossTerm {
  LossTermKind kind;
  float coefficient;
};

// The terms of `config`'s loss, in the order they are summed (the
// surrogate, the entropy bonus, the value loss: the order both paths have
// always added them, so sums stay bit-identical).
std::vector<LossTerm> PpoLossTerms(const PPOConfig& config);

// OK where the fused CPU path (learner/fused_ppo.cc) computes `kind` and
// its gradient; FAILED_PRECONDITION naming the term where it refuses it;
// INTERNAL for a kind it has said nothing about (a bug the test catches).
absl::Status FusedImplements(LossTermKind kind);

// OK when the fused path implements every term of `terms`, else the
// first refusal.
absl::Status FusedImplementsAll(const std::vector<LossTerm>& terms);

}  // namespace rl

#endif  // RL_LEARNER_PPO_LOSS_TERMS_H_
