#include "policy/segment_codec.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "common/tensor_codec.h"

namespace rl {
namespace {

std::string ShapeString(const std::vector<int64_t>& shape) {
  return c10::str(c10::IntArrayRef(shape));
}

absl::StatusOr<torch::Tensor> Field(const Tensor& proto, const char* name,
                                    c10::ScalarType dtype,
                                    const std::vector<int64_t>& shape) {
  const std::string field = absl::StrCat("segment.", name);
  ASSIGN_OR_RETURN(torch::Tensor t, DecodeTensorView(proto, field));
  if (t.scalar_type() != dtype) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": dtype must be ", c10::toString(dtype), " (got ",
                     c10::toString(t.scalar_type()), ")"));
  }
  if (!t.sizes().equals(shape)) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": shape must be ",
                                                   ShapeString(shape), " (got ",
                                                   c10::str(t.sizes()), ")"));
  }
  if (t.is_floating_point() && t.numel() > 0 &&
      !torch::isfinite(t).all().item<bool>()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": values must be finite (found NaN or inf)"));
  }
  return t;
}

}  // namespace

absl::Status EncodeSegment(const Rollout& r, RolloutSegment* s) {
  RETURN_IF_ERROR(EncodeTensor(r.observations, s->mutable_observations()));
  RETURN_IF_ERROR(EncodeTensor(r.actions, s->mutable_actions()));
  RETURN_IF_ERROR(EncodeTensor(r.log_probs, s->mutable_log_probs()));
  RETURN_IF_ERROR(EncodeTensor(r.values, s->mutable_values()));
  RETURN_IF_ERROR(EncodeTensor(r.rewards, s->mutable_rewards()));
  RETURN_IF_ERROR(
      EncodeTensor(r.terminated.to(torch::kBool), s->mutable_terminated()));
  RETURN_IF_ERROR(
      EncodeTensor(r.truncated.to(torch::kBool), s->mutable_truncated()));
  RETURN_IF_ERROR(
      EncodeTensor(r.truncated_values, s->mutable_truncated_values()));
  RETURN_IF_ERROR(
      EncodeTensor(r.next_observations, s->mutable_next_observations()));
  RETURN_IF_ERROR(EncodeTensor(r.next_values, s->mutable_next_values()));
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
      s.env().continuous_action_size() != want.continuous_action_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "segment.env: sizes (observation ", s.env().observation_size(),
        ", discrete actions ", s.env().num_discrete_actions(),
        ", continuous actions ", s.env().continuous_action_size(),
        ") do not match the run's (", want.observation_size(), ", ",
        want.num_discrete_actions(), ", ", want.continuous_action_size(), ")"));
  }
  const int64_t T = shape.num_steps, E = shape.num_envs;
  const int64_t obs = want.observation_size();
  const bool discrete = want.num_discrete_actions() > 0;
  Rollout r;
  ASSIGN_OR_RETURN(r.observations, Field(s.observations(), "observations",
                                         torch::kFloat32, {T, E, obs}));
  if (discrete) {
    ASSIGN_OR_RETURN(r.actions,
                     Field(s.actions(), "actions", torch::kInt64, {T, E}));
    if (r.actions.numel() > 0 &&
        ((r.actions < 0).any().item<bool>() ||
         (r.actions >= want.num_discrete_actions()).any().item<bool>())) {
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
  ASSIGN_OR_RETURN(r.values,
                   Field(s.values(), "values", torch::kFloat32, {T, E}));
  ASSIGN_OR_RETURN(r.rewards,
                   Field(s.rewards(), "rewards", torch::kFloat32, {T, E}));
  ASSIGN_OR_RETURN(torch::Tensor terminated,
                   Field(s.terminated(), "terminated", torch::kBool, {T, E}));
  ASSIGN_OR_RETURN(torch::Tensor truncated,
                   Field(s.truncated(), "truncated", torch::kBool, {T, E}));
  // Bool bytes other than 0/1 are undefined behaviour once read as bool.
  for (const auto& [name, t] :
       {std::pair<const char*, torch::Tensor>{"terminated", terminated},
        {"truncated", truncated}}) {
    const torch::Tensor bytes = t.view(torch::kUInt8);
    if (bytes.numel() > 0 && (bytes > 1).any().item<bool>()) {
      return absl::InvalidArgumentError(
          absl::StrCat("segment.", name, ": bytes must be 0 or 1"));
    }
  }
  r.terminated = terminated.view(torch::kUInt8);
  r.truncated = truncated.view(torch::kUInt8);
  ASSIGN_OR_RETURN(
      r.truncated_values,
      Field(s.truncated_values(), "truncated_values", torch::kFloat32, {T, E}));
  ASSIGN_OR_RETURN(r.next_observations,
                   Field(s.next_observations(), "next_observations",
                         torch::kFloat32, {E, obs}));
  ASSIGN_OR_RETURN(r.next_values,
                   Field(s.next_values(), "next_values", torch::kFloat32, {E}));
  if (s.episode_returns_size() != s.episode_lengths_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "segment.episode_returns: ", s.episode_returns_size(),
        " entries but episode_lengths has ", s.episode_lengths_size()));
  }
  for (int i = 0; i < s.episode_returns_size(); ++i) {
    if (!std::isfinite(s.episode_returns(i)) || s.episode_lengths(i) < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "segment.episode_returns[", i, "]: must be finite with length >= 1"));
    }
  }
  return r;
}

Rollout ConcatenateRollouts(const std::vector<Rollout>& parts) {
  if (parts.size() == 1) return parts[0];
  auto cat = [&](auto member, int64_t dim) {
    std::vector<torch::Tensor> ts;
    ts.reserve(parts.size());
    for (const Rollout& p : parts) ts.push_back(p.*member);
    return torch::cat(ts, dim);
  };
  Rollout r;
  r.observations = cat(&Rollout::observations, 1);
  r.actions = cat(&Rollout::actions, 1);
  r.log_probs = cat(&Rollout::log_probs, 1);
  r.values = cat(&Rollout::values, 1);
  r.rewards = cat(&Rollout::rewards, 1);
  r.terminated = cat(&Rollout::terminated, 1);
  r.truncated = cat(&Rollout::truncated, 1);
  r.truncated_values = cat(&Rollout::truncated_values, 1);
  r.next_observations = cat(&Rollout::next_observations, 0);
  r.next_values = cat(&Rollout::next_values, 0);
  return r;
}

}  // namespace rl
