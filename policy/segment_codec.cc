#include "policy/segment_codec.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "common/tensor_codec.h"
#include "policy/torch_status.h"

namespace rl {
namespace {

absl::StatusOr<torch::Tensor> Field(const Tensor& proto, const char* name,
                                    c10::ScalarType dtype,
                                    const std::vector<int64_t>& shape) {
  const std::string field = absl::StrCat("segment.", name);
  ASSIGN_OR_RETURN(torch::Tensor t, DecodeTensorView(proto, field));
  RETURN_IF_ERROR(CheckTensor(t, field, dtype, shape));
  RETURN_IF_ERROR(CheckFinite(t, field));
  return t;
}

// Whether every element of the integer tensor `t` is in [lo, hi).
absl::StatusOr<bool> AllInRange(const torch::Tensor& t, absl::string_view name,
                                int64_t lo, int64_t hi) {
  return CatchTorchErrors(name, [&] {
    return t.numel() == 0 || ((t >= lo) & (t < hi)).all().item<bool>();
  });
}

// A bool tensor as the uint8 the Rollout holds; INVALID_ARGUMENT for bytes
// other than 0/1, which are undefined behaviour once read as bool.
absl::StatusOr<torch::Tensor> FlagBytes(const torch::Tensor& flags,
                                        absl::string_view name) {
  ASSIGN_OR_RETURN(torch::Tensor bytes, CatchTorchErrors(name, [&] {
                     return flags.view(torch::kUInt8);
                   }));
  ASSIGN_OR_RETURN(const bool valid, AllInRange(bytes, name, 0, 2));
  if (!valid) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": bytes must be 0 or 1"));
  }
  return bytes;
}

// `bound` moved outwards (`direction` -1 or 1) by a float rounding margin.
double Slack(double bound, int direction) {
  return bound + direction * 1e-5 * (1 + std::fabs(bound));
}

// INVALID_ARGUMENT naming the first element of `t` outside [lo, hi], which
// the message calls `range`.
absl::Status CheckRange(const torch::Tensor& t, absl::string_view name,
                        float lo, float hi,
                        absl::string_view range = "the environment's range") {
  if (!std::isfinite(lo) && !std::isfinite(hi)) return absl::OkStatus();
  const double low = Slack(lo, -1), high = Slack(hi, 1);
  ASSIGN_OR_RETURN(const bool inside, CatchTorchErrors(name, [&] {
                     return t.numel() == 0 ||
                            ((t >= low) & (t <= high)).all().item<bool>();
                   }));
  if (inside) return absl::OkStatus();
  ASSIGN_OR_RETURN(
      const std::string where, CatchTorchErrors(name, [&] {
        const torch::Tensor bad =
            torch::logical_not((t >= low) & (t <= high)).flatten().nonzero();
        const int64_t i = bad[0].item<int64_t>();
        return absl::StrCat("element ", i, " is ",
                            t.flatten()[i].item<float>());
      }));
  return absl::InvalidArgumentError(absl::StrCat(
      name, ": ", where, ", outside ", range, " [", low, ", ", high, "]"));
}

// The episodes a segment claims must be the ones its flags end: one entry
// per step where an env terminated or was truncated, in [T, E] row-major
// order; an env's second and later episodes in the segment last exactly
// the steps since its previous end, and its first lasts at least the steps
// of the segment up to its end (it began before the segment) and at most
// the time limit (`max_episode_steps`, 0: none). So no episode (and no
// "target reached" from one) is claimed that the segment's steps do not
// hold.
absl::Status CheckEpisodesFit(const RolloutSegment& s,
                              const torch::Tensor& terminated,
                              const torch::Tensor& truncated,
                              const torch::Tensor& alive, int64_t T, int64_t E,
                              int64_t max_episode_steps) {
  ASSIGN_OR_RETURN(const torch::Tensor done,
                   CatchTorchErrors("segment.terminated", [&] {
                     return (terminated | truncated).contiguous();
                   }));
  const uint8_t* ended = done.data_ptr<uint8_t>();
  // Agents that leave early: an episode lasts its alive steps (the padding
  // between an agent's end and its copy's reset belongs to none).
  const uint8_t* in_game =
      alive.defined() ? alive.data_ptr<uint8_t>() : nullptr;
  std::vector<int64_t> last_end(E, -1), steps(E, 0);
  int k = 0;
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t e = 0; e < E; ++e) {
      if (in_game == nullptr || in_game[t * E + e]) ++steps[e];
      if (!ended[t * E + e]) continue;
      if (k >= s.episode_lengths_size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "segment.episode_lengths: ", s.episode_lengths_size(),
            " episodes, but the segment's terminated/truncated flags end "
            "more (env ",
            e, " at step ", t, ")"));
      }
      const int64_t length = s.episode_lengths(k);
      const int64_t since = steps[e];  // steps in this segment
      const bool first = last_end[e] < 0;
      if ((!first && length != since) || (first && length < since) ||
          (max_episode_steps > 0 && length > max_episode_steps)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "segment.episode_lengths[", k, "]: ", length,
            " steps does not fit the segment (env ", e, " ended at step ", t,
            first ? absl::StrCat(", its first end in the segment: at least ",
                                 since)
                  : absl::StrCat(", ", since, " steps after its previous end"),
            max_episode_steps > 0
                ? absl::StrCat("; time limit ", max_episode_steps)
                : "",
            ")"));
      }
      last_end[e] = t;
      steps[e] = 0;
      ++k;
    }
  }
  if (k != s.episode_lengths_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "segment.episode_lengths: ", s.episode_lengths_size(),
        " episodes, but the segment's terminated/truncated flags end ", k));
  }
  return absl::OkStatus();
}

// With env.episodic_life the episodes a segment claims are games, each
// ending on one of the steps its flags end (a lost life ends the others):
// at most that many, of any length (a game began before the segment, lives
// ago).
absl::Status CheckGamesFit(const RolloutSegment& s,
                           const torch::Tensor& terminated,
                           const torch::Tensor& truncated) {
  ASSIGN_OR_RETURN(const int64_t ends,
                   CatchTorchErrors("segment.terminated", [&] {
                     return (terminated | truncated).sum().item<int64_t>();
                   }));
  if (s.episode_lengths_size() > ends) {
    return absl::InvalidArgumentError(absl::StrCat(
        "segment.episode_lengths: ", s.episode_lengths_size(),
        " games, but the segment's terminated/truncated flags end ", ends,
        " episodes (env.episodic_life: a game ends on one of them)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status EncodeSegment(const Rollout& r, RolloutSegment* s) {
  const std::pair<const char*, const torch::Tensor*> fields[] = {
      {"observations", &r.observations},
      {"actions", &r.actions},
      {"log_probs", &r.log_probs},
      {"values", &r.values},
      {"rewards", &r.rewards},
      {"terminated", &r.terminated},
      {"truncated", &r.truncated},
      {"truncated_values", &r.truncated_values},
      {"next_observations", &r.next_observations},
      {"next_values", &r.next_values}};
  for (const auto& [name, tensor] : fields) {
    if (!tensor->defined()) {
      return absl::InvalidArgumentError(
          absl::StrCat("rollout.", name, ": undefined (not allocated)"));
    }
  }
  ASSIGN_OR_RETURN(const torch::Tensor terminated,
                   CatchTorchErrors("encoding rollout.terminated", [&] {
                     return r.terminated.to(torch::kBool);
                   }));
  ASSIGN_OR_RETURN(const torch::Tensor truncated,
                   CatchTorchErrors("encoding rollout.truncated", [&] {
                     return r.truncated.to(torch::kBool);
                   }));
  RETURN_IF_ERROR(EncodeTensor(r.observations, s->mutable_observations()));
  RETURN_IF_ERROR(EncodeTensor(r.actions, s->mutable_actions()));
  RETURN_IF_ERROR(EncodeTensor(r.log_probs, s->mutable_log_probs()));
  RETURN_IF_ERROR(EncodeTensor(r.values, s->mutable_values()));
  RETURN_IF_ERROR(EncodeTensor(r.rewards, s->mutable_rewards()));
  RETURN_IF_ERROR(EncodeTensor(terminated, s->mutable_terminated()));
  RETURN_IF_ERROR(EncodeTensor(truncated, s->mutable_truncated()));
  RETURN_IF_ERROR(
      EncodeTensor(r.truncated_values, s->mutable_truncated_values()));
  RETURN_IF_ERROR(
      EncodeTensor(r.next_observations, s->mutable_next_observations()));
  RETURN_IF_ERROR(EncodeTensor(r.next_values, s->mutable_next_values()));
  if (r.action_masks.defined()) {
    ASSIGN_OR_RETURN(const torch::Tensor masks,
                     CatchTorchErrors("encoding rollout.action_masks", [&] {
                       return r.action_masks.to(torch::kBool);
                     }));
    RETURN_IF_ERROR(EncodeTensor(masks, s->mutable_action_masks()));
  }
  if (r.initial_state.defined()) {
    RETURN_IF_ERROR(EncodeTensor(r.initial_state, s->mutable_initial_state()));
  }
  if (r.alive.defined()) {
    ASSIGN_OR_RETURN(const torch::Tensor alive,
                     CatchTorchErrors("encoding rollout.alive", [&] {
                       return r.alive.to(torch::kBool);
                     }));
    RETURN_IF_ERROR(EncodeTensor(alive, s->mutable_alive()));
  }
  return absl::OkStatus();
}

absl::StatusOr<Rollout> DecodeSegment(const RolloutSegment& s,
                                      const SegmentShape& shape) {
  const EnvSpec& want = shape.env;
  if (s.env().id() != want.id()) {
    return absl::InvalidArgumentError(absl::StrCat("segment.env.id: must be \"",
                                                   want.id(), "\" (got \"",
                                                   s.env().id(), "\")"));
  }
  if (s.env().observation_size() != want.observation_size() ||
      s.env().num_discrete_actions() != want.num_discrete_actions() ||
      s.env().continuous_action_size() != want.continuous_action_size() ||
      !std::equal(s.env().action_nvec().begin(), s.env().action_nvec().end(),
                  want.action_nvec().begin(), want.action_nvec().end())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "segment.env: sizes (observation ", s.env().observation_size(),
        ", discrete actions ", s.env().num_discrete_actions(),
        ", continuous actions ", s.env().continuous_action_size(),
        ") do not match the run's (", want.observation_size(), ", ",
        want.num_discrete_actions(), ", ", want.continuous_action_size(), ")"));
  }
  // uint8 observations (images) stay bytes; "" means float32.
  const bool bytes = want.observation_dtype() == "uint8";
  if ((s.env().observation_dtype() == "uint8") != bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "segment.env.observation_dtype: must be ", bytes ? "uint8" : "float32",
        " (got \"", s.env().observation_dtype().substr(0, 64), "\")"));
  }
  const torch::Dtype obs_dtype = bytes ? torch::kUInt8 : torch::kFloat32;
  const int64_t T = shape.num_steps, E = shape.num_envs;
  const int64_t obs = want.observation_size();
  const bool discrete = want.num_discrete_actions() > 0;
  // The choices of each part of an integer action (Discrete: one part).
  std::vector<int64_t> parts(want.action_nvec().begin(),
                             want.action_nvec().end());
  if (discrete) parts = {want.num_discrete_actions()};
  Rollout r;
  ASSIGN_OR_RETURN(r.observations, Field(s.observations(), "observations",
                                         obs_dtype, {T, E, obs}));
  if (want.action_nvec_size() > 0) {
    const int64_t k = want.action_nvec_size();
    ASSIGN_OR_RETURN(r.actions,
                     Field(s.actions(), "actions", torch::kInt64, {T, E, k}));
    const int64_t* a = r.actions.data_ptr<int64_t>();
    for (int64_t x = 0; x < T * E * k; ++x) {
      if (a[x] < 0 || a[x] >= parts[x % k]) {
        return absl::InvalidArgumentError(
            absl::StrCat("segment.actions: part ", x % k, " must be in [0, ",
                         parts[x % k], ") (got ", a[x], ")"));
      }
    }
  } else if (discrete) {
    ASSIGN_OR_RETURN(r.actions,
                     Field(s.actions(), "actions", torch::kInt64, {T, E}));
    ASSIGN_OR_RETURN(const bool in_range,
                     AllInRange(r.actions, "segment.actions", 0,
                                want.num_discrete_actions()));
    if (!in_range) {
      return absl::InvalidArgumentError(
          absl::StrCat("segment.actions: must be in [0, ",
                       want.num_discrete_actions(), ")"));
    }
  } else {
    ASSIGN_OR_RETURN(r.actions, Field(s.actions(), "actions", torch::kFloat32,
                                      {T, E, want.continuous_action_size()}));
  }
  ASSIGN_OR_RETURN(r.log_probs,
                   Field(s.log_probs(), "log_probs", torch::kFloat32, {T, E}));
  if (!parts.empty()) {
    // A probability is at most 1, and a sampled choice's is not 0: at
    // least e^-745, the smallest a double's exp gives (the Gumbel-max
    // heads' clamped noise keeps it far above). Lower, with room per part
    // of the action, the number is no sampler's: refused here, naming the
    // field, rather than overflowing the update's ratio exp(new - old) and
    // skipping the whole batch's update.
    RETURN_IF_ERROR(
        CheckRange(r.log_probs, "segment.log_probs",
                   kLowestChoiceLogProb * static_cast<float>(parts.size()), 0,
                   "a sampled action's range"));
  }
  ASSIGN_OR_RETURN(r.values,
                   Field(s.values(), "values", torch::kFloat32, {T, E}));
  ASSIGN_OR_RETURN(r.rewards,
                   Field(s.rewards(), "rewards", torch::kFloat32, {T, E}));
  RETURN_IF_ERROR(CheckRange(r.rewards, "segment.rewards", shape.min_reward,
                             shape.max_reward));
  ASSIGN_OR_RETURN(torch::Tensor terminated,
                   Field(s.terminated(), "terminated", torch::kBool, {T, E}));
  ASSIGN_OR_RETURN(torch::Tensor truncated,
                   Field(s.truncated(), "truncated", torch::kBool, {T, E}));
  ASSIGN_OR_RETURN(r.terminated, FlagBytes(terminated, "segment.terminated"));
  ASSIGN_OR_RETURN(r.truncated, FlagBytes(truncated, "segment.truncated"));
  ASSIGN_OR_RETURN(
      r.truncated_values,
      Field(s.truncated_values(), "truncated_values", torch::kFloat32, {T, E}));
  ASSIGN_OR_RETURN(
      r.next_observations,
      Field(s.next_observations(), "next_observations", obs_dtype, {E, obs}));
  ASSIGN_OR_RETURN(r.next_values,
                   Field(s.next_values(), "next_values", torch::kFloat32, {E}));
  if (want.action_mask()) {
    int64_t n = 0;
    for (const int64_t p : parts) n += p;
    const int64_t k = static_cast<int64_t>(parts.size());
    ASSIGN_OR_RETURN(
        torch::Tensor masks,
        Field(s.action_masks(), "action_masks", torch::kBool, {T, E, n}));
    ASSIGN_OR_RETURN(r.action_masks, FlagBytes(masks, "segment.action_masks"));
    // Every part of every row allows a choice, and the one taken was
    // allowed.
    const uint8_t* m = r.action_masks.data_ptr<uint8_t>();
    const int64_t* a = r.actions.data_ptr<int64_t>();
    for (int64_t i = 0; i < T * E; ++i) {
      int64_t at = 0;
      for (int64_t j = 0; j < k; ++j) {
        uint8_t any = 0;
        for (int64_t c = 0; c < parts[j]; ++c) any |= m[i * n + at + c];
        const int64_t taken = a[i * k + j];
        if (!any || !m[i * n + at + taken]) {
          return absl::InvalidArgumentError(absl::StrCat(
              "segment.action_masks: at step ", i / E, ", env ", i % E,
              k > 1 ? absl::StrCat(", part ", j) : "",
              any ? absl::StrCat(" the action taken (", taken, ") is masked")
                  : std::string(" no action is allowed")));
        }
        at += parts[j];
      }
    }
  } else if (s.has_action_masks()) {
    return absl::InvalidArgumentError(
        "segment.action_masks: the run's env writes no action masks");
  }
  if (shape.state_size > 0) {
    ASSIGN_OR_RETURN(r.initial_state,
                     Field(s.initial_state(), "initial_state", torch::kFloat32,
                           {E, shape.state_size}));
  } else if (s.has_initial_state()) {
    return absl::InvalidArgumentError(
        "segment.initial_state: the run's policy has no recurrent core "
        "(policy.core)");
  }
  if (want.agents_leave()) {
    ASSIGN_OR_RETURN(torch::Tensor alive,
                     Field(s.alive(), "alive", torch::kBool, {T, E}));
    ASSIGN_OR_RETURN(r.alive, FlagBytes(alive, "segment.alive"));
    // A padding step pays nothing and ends nothing, and a row leaves only
    // at its episode's end.
    const uint8_t* in = r.alive.data_ptr<uint8_t>();
    const uint8_t* term = r.terminated.data_ptr<uint8_t>();
    const uint8_t* trunc = r.truncated.data_ptr<uint8_t>();
    const float* reward = r.rewards.data_ptr<float>();
    for (int64_t i = 0; i < T * E; ++i) {
      if (!in[i] && (term[i] || trunc[i] || reward[i] != 0.f)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "segment.alive: at step ", i / E, ", env ", i % E,
            " the row had left its game (padding), yet its reward is ",
            reward[i], (term[i] || trunc[i]) ? " and it ends an episode" : "",
            " (padding has reward and flags 0)"));
      }
      if (i + E < T * E && in[i] && !in[i + E] && !term[i] && !trunc[i]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "segment.alive: env ", i % E, " leaves its game after step ", i / E,
            " without its episode ending there"));
      }
    }
  } else if (s.has_alive()) {
    return absl::InvalidArgumentError(
        "segment.alive: the run's agents do not leave early "
        "(env.agents_leave)");
  }
  if (!shape.episodes) {
    if (s.episode_returns_size() > 0 || s.episode_lengths_size() > 0 ||
        s.episode_rows_size() > 0) {
      return absl::InvalidArgumentError(
          "segment.episode_returns: rows sent on by the run's learner carry "
          "no episodes");
    }
    return r;
  }
  // At most one episode per env can end at each step: every byte of a
  // segment is sized by the run.
  if (s.episode_returns_size() > T * E) {
    return absl::InvalidArgumentError(
        absl::StrCat("segment.episode_returns: ", s.episode_returns_size(),
                     " entries, more than the ", T * E,
                     " episodes a segment of the run can end (segment_length x "
                     "envs_per_actor)"));
  }
  if (s.episode_returns_size() != s.episode_lengths_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "segment.episode_returns: ", s.episode_returns_size(),
        " entries but episode_lengths has ", s.episode_lengths_size()));
  }
  RETURN_IF_ERROR(want.episodic_life()
                      ? CheckGamesFit(s, r.terminated, r.truncated)
                      : CheckEpisodesFit(s, r.terminated, r.truncated, r.alive,
                                         T, E, want.max_episode_steps()));
  for (int i = 0; i < s.episode_returns_size(); ++i) {
    if (!std::isfinite(s.episode_returns(i)) || s.episode_lengths(i) < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "segment.episode_returns[", i, "]: must be finite with length >= 1"));
    }
    // A game's return is in raw rewards over its lives: the declared
    // range bounds the training rewards (clipped, for Atari), not it.
    if (want.episodic_life()) continue;
    const double length = s.episode_lengths(i);
    const double lo = Slack(shape.min_step_return * length, -1);
    const double hi = Slack(shape.max_step_return * length, 1);
    if (s.episode_returns(i) < lo || s.episode_returns(i) > hi) {
      return absl::InvalidArgumentError(absl::StrCat(
          "segment.episode_returns[", i, "]: ", s.episode_returns(i),
          " is outside the environment's range [", lo, ", ", hi,
          "] for an episode of ", s.episode_lengths(i), " steps"));
    }
  }
  return r;
}

absl::StatusOr<Rollout> ConcatenateRollouts(const std::vector<Rollout>& parts) {
  if (parts.empty()) {
    return absl::InvalidArgumentError("no rollouts to concatenate");
  }
  if (parts.size() == 1) return parts[0];
  // Each tensor with the axis that holds the environments.
  constexpr std::pair<const char*, torch::Tensor Rollout::*> kMembers[] = {
      {"observations", &Rollout::observations},
      {"actions", &Rollout::actions},
      {"log_probs", &Rollout::log_probs},
      {"values", &Rollout::values},
      {"rewards", &Rollout::rewards},
      {"terminated", &Rollout::terminated},
      {"truncated", &Rollout::truncated},
      {"truncated_values", &Rollout::truncated_values},
      {"next_observations", &Rollout::next_observations},
      {"next_values", &Rollout::next_values},
      {"action_masks", &Rollout::action_masks},
      {"initial_state", &Rollout::initial_state},
      {"alive", &Rollout::alive}};
  Rollout r;
  for (const auto& [name, member] : kMembers) {
    if (member == &Rollout::action_masks || member == &Rollout::initial_state ||
        member == &Rollout::alive) {
      // All with them or none.
      bool any = false, all = true;
      for (const Rollout& part : parts) {
        any |= (part.*member).defined();
        all &= (part.*member).defined();
      }
      if (!any) continue;
      if (!all) {
        return absl::InvalidArgumentError(
            absl::StrCat("rollouts: some have ", name, " and some do not"));
      }
    }
    const int64_t env_axis = member == &Rollout::next_observations ||
                                     member == &Rollout::next_values ||
                                     member == &Rollout::initial_state
                                 ? 0
                                 : 1;
    // Checked here so that a mismatch is INVALID_ARGUMENT naming the
    // rollout, not LibTorch's message from inside torch::cat.
    const torch::Tensor& first = parts[0].*member;
    std::vector<int64_t> shape =
        first.defined() ? first.sizes().vec() : std::vector<int64_t>{};
    if (static_cast<int64_t>(shape.size()) > env_axis) shape[env_axis] = -1;
    std::vector<torch::Tensor> tensors;
    tensors.reserve(parts.size());
    for (size_t i = 0; i < parts.size(); ++i) {
      const torch::Tensor& t = parts[i].*member;
      RETURN_IF_ERROR(CheckTensor(
          t, absl::StrCat("rollouts[", i, "].", name),
          first.defined() ? first.scalar_type() : torch::kFloat32, shape));
      if (t.dim() <= env_axis) {
        return absl::InvalidArgumentError(absl::StrCat(
            "rollouts[", i, "].", name, ": has no environment axis (",
            DescribeTensor(t), ")"));
      }
      tensors.push_back(t);
    }
    ASSIGN_OR_RETURN(
        r.*member, CatchTorchErrors(absl::StrCat("concatenating ", name), [&] {
          return torch::cat(tensors, env_axis);
        }));
  }
  return r;
}

}  // namespace rl
