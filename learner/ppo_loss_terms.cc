#include "learner/ppo_loss_terms.h"

#include "absl/strings/str_cat.h"

namespace rl {

const char* LossTermName(LossTermKind kind) {
  switch (kind) {
    case LossTermKind::kClippedSurrogate:
      return "clipped_surrogate";
    case LossTermKind::kValue:
      return "value";
    case LossTermKind::kClippedValue:
      return "clipped_value";
    case LossTermKind::kEntropyBonus:
      return "entropy_bonus";
    case LossTermKind::kCount:
      break;
  }
  return "unknown";
}

std::vector<LossTerm> PpoLossTerms(const PPOConfig& config) {
  return {
      {LossTermKind::kClippedSurrogate, 1.0f},
      {LossTermKind::kEntropyBonus, -config.entropy_coef()},
      {config.clip_value_loss() ? LossTermKind::kClippedValue
                                : LossTermKind::kValue,
       config.value_coef()},
  };
}

absl::Status FusedImplements(LossTermKind kind) {
  // The fused path's own word on each kind: learner/fused_ppo.cc computes
  // these four by hand (FusedPpoLoss::ComputeChunk). A new kind goes here
  // as implemented (with its hand-written gradient and a case in
  // fused_ppo_test) or refused, with why.
  switch (kind) {
    case LossTermKind::kClippedSurrogate:
    case LossTermKind::kValue:
    case LossTermKind::kClippedValue:
    case LossTermKind::kEntropyBonus:
      return absl::OkStatus();
    case LossTermKind::kCount:
      break;
  }
  return absl::InternalError(
      absl::StrCat("the fused PPO loss neither implements nor refuses the "
                   "loss term ",
                   LossTermName(kind), " (", static_cast<int>(kind), ")"));
}

absl::Status FusedImplementsAll(const std::vector<LossTerm>& terms) {
  for (const LossTerm& term : terms) {
    absl::Status status = FusedImplements(term.kind);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace rl
