#include "runspec/run_footprint.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "runspec/named_policies.h"
#include "runspec/policy_rules.h"

namespace rl {
namespace {

constexpr double kFloat = 4;

// Weights and biases of an MLP trunk obs -> hidden...; returns its width.
double TrunkParameters(double in, const RunSpec& spec, double* width) {
  double params = 0;
  for (int h : spec.policy().hidden_sizes()) {
    params += in * h + h;
    in = h;
  }
  *width = in;
  return params;
}

// One image's CNN (policy.encoder, as policy/actor_critic.cc builds it):
// its weights; adds the floats of one image's activations (every layer's
// output) to `activations` and its output width to `width`.
double ImageCnnParameters(const PolicyConfig& policy,
                          const std::vector<int>& image, double* activations,
                          double* width) {
  const bool hwc = policy.image_layout() == "hwc";
  double c = image[hwc ? 2 : 0];
  int64_t h = image[hwc ? 0 : 1];
  int64_t w = image[hwc ? 1 : 2];
  double params = 0;
  auto conv = [&](double out, int64_t kernel, int64_t stride, int64_t pad) {
    params += c * out * kernel * kernel + out;
    h = (h + 2 * pad - kernel) / stride + 1;
    w = (w + 2 * pad - kernel) / stride + 1;
    c = out;
    *activations += c * static_cast<double>(h * w);
  };
  double features = 0;
  if (policy.encoder() == "nature_cnn") {
    conv(32, 8, 4, 0);
    conv(64, 4, 2, 0);
    conv(64, 3, 1, 0);
    features = 512;
  } else {
    for (double out : {16.0, 32.0, 32.0}) {
      conv(out, 3, 1, 1);
      h = (h - 1) / 2 + 1;  // max pool 3, stride 2, padding 1
      w = (w - 1) / 2 + 1;
      for (int k = 0; k < 4; ++k) conv(out, 3, 1, 1);  // 2 residual blocks
    }
    features = 256;
  }
  params += c * static_cast<double>(h * w) * features + features;
  *activations += features;
  *width += features;
  return params;
}

// A CNN encoder: its weights, the floats of one observation's activations,
// and the trunks' input width (the features, and a Dict's other parts).
// 0 for the MLP.
double CnnParameters(const RunSpec& spec, double* activations, double* width) {
  *activations = 0;
  *width = 0;
  const PolicyConfig& policy = spec.policy();
  const EnvSpec& env = spec.env();
  if (!IsCnnEncoder(policy)) return 0;
  double params = 0;
  if (env.observation_parts_size() == 0) {
    if (env.observation_shape_size() != 3) return 0;
    return ImageCnnParameters(policy,
                              std::vector<int>(env.observation_shape().begin(),
                                               env.observation_shape().end()),
                              activations, width);
  }
  // Per key: a CNN per image part, the other parts as they are.
  for (const ObservationPart& part : env.observation_parts()) {
    if (part.dtype() == "uint8" && part.shape_size() == 3) {
      params += ImageCnnParameters(
          policy, std::vector<int>(part.shape().begin(), part.shape().end()),
          activations, width);
    } else {
      double size = 1;
      for (int d : part.shape()) size *= d;
      *width += size;
    }
  }
  return params;
}

// A finished episode in a segment: a packed float return and a packed
// int32 length (a varint, at most 5 bytes for a positive one).
constexpr double kEpisodeBytes = 4 + 5;
// Tags, lengths, dtypes and shapes of a segment's ten tensors (at most ~60
// bytes each), its run id (coordinator ids are short), actor id, sequence
// number, policy version, incarnation, and the packed fields' headers.
constexpr double kSegmentOverheadBytes = 1024;

// The actors that stream to one learner rank (each rank's batch holds a
// segment of each).
double ActorsPerLearner(const RunSpec& spec) {
  const int learners = std::max(1, spec.resources().num_learners());
  return std::ceil(
      static_cast<double>(std::max(1, spec.resources().num_actors())) /
      learners);
}

// The footprint of a run of one policy (no policies block).
RunFootprint OnePolicyFootprint(const RunSpec& spec) {
  RunFootprint f;
  const EnvSpec& env = spec.env();
  const double obs = std::max(1, env.observation_size());
  // Bytes of one observation element: uint8 images are 1, floats 4.
  const double obs_element = env.observation_dtype() == "uint8" ? 1 : kFloat;
  const bool discrete =
      env.num_discrete_actions() > 0 || env.action_nvec_size() > 0;
  // The policy head's outputs: the choices (each part's, for MultiDiscrete)
  // or the action's floats.
  double nvec_sum = 0;
  for (const int32_t n : env.action_nvec()) nvec_sum += n;
  const double actions = env.action_nvec_size() > 0 ? nvec_sum
                         : discrete                 ? env.num_discrete_actions()
                                    : env.continuous_action_size();
  const double e = std::max(1, spec.envs_per_actor());
  const double t = std::max(1, spec.segment_length());
  double hidden_sum = 0;
  for (int h : spec.policy().hidden_sizes()) hidden_sum += h;

  // A CNN encoder (shared) where the policy has one; two trunks (policy
  // and value) after it, a policy head, a value head, log std.
  double cnn_activations = 0, cnn_width = 0;
  const double cnn = CnnParameters(spec, &cnn_activations, &cnn_width);
  double width = 0;
  const double trunk_in = cnn > 0 ? cnn_width : obs;
  const double trunk = TrunkParameters(trunk_in, spec, &width);
  // A central critic's value trunk reads every agent's features.
  const PolicyConfig& policy = spec.policy();
  const double central_agents =
      policy.central_value() && env.agents_per_env() > 1 ? env.agents_per_env()
                                                         : 0;
  double value_width = width;
  const double value_trunk =
      central_agents > 0
          ? TrunkParameters(trunk_in * central_agents, spec, &value_width)
          : trunk;
  // A recurrent core (one shared trunk before it): an LSTM's 4 gates or a
  // GRU's 3, each with two biases; its gates and state per env and step.
  const double gates = !HasRecurrentCore(policy) ? 0
                       : policy.core() == "lstm" ? 4
                                                 : 3;
  const double core_size = policy.core_size();
  double core = 0, core_activations = 0;
  if (gates > 0) {
    core = gates * core_size * (width + core_size + 2);
    core_activations = gates * core_size + RecurrentStateSize(policy);
    width = core_size;
  }
  // Its input, gathered for every row: A x the features, floats (beside a
  // core, A x the core's outputs, which the value head reads).
  const double central_input =
      central_agents * (gates > 0 ? core_size : trunk_in);
  // A Bernoulli head (MultiBinary): one logit per bit.
  const double logits = env.action_binary() > 0 ? env.action_binary() : actions;
  f.parameters =
      cnn + trunk + (gates > 0 ? 0 : value_trunk) + core +
      (width * logits + logits) +
      ((gates > 0 ? width * std::max(1.0, central_agents) : value_width) + 1) +
      (discrete ? 0 : actions);
  // The weights plus the observation normaliser's buffers (and the scale
  // of a float Dict's uint8 parts).
  bool byte_parts = false;
  for (const ObservationPart& part : env.observation_parts()) {
    byte_parts |= part.dtype() == "uint8";
  }
  const bool scale = byte_parts && env.observation_dtype() != "uint8";
  f.policy_bytes = (f.parameters + (scale ? 3 : 2) * obs + 1) * kFloat;

  // Per step and env: observation, action (int64 or A floats), log prob,
  // value, reward, truncated value (floats), two flags, and at most one
  // finished episode (its return, a float, and its length, a varint of at
  // most 5 bytes); then the final observations and values, and what every
  // message carries (field tags and lengths of ten tensors, their shapes,
  // the env spec, run id, sequence numbers): an upper bound of the encoded
  // size, so that no admitted run has segments refused for size.
  const double action_bytes =
      discrete ? 8.0 * std::max(1, env.action_nvec_size()) : actions * kFloat;
  // An action mask: one byte per action.
  const double mask_bytes = env.action_mask() ? actions : 0;
  const double per_row = obs * obs_element + action_bytes + mask_bytes +
                         4 * kFloat + 2 + kEpisodeBytes;
  // The recurrent state at the segment's start, floats per env.
  const double state_bytes = RecurrentStateSize(policy) * kFloat;
  f.segment_bytes =
      t * e * per_row + e * (obs * obs_element + kFloat + state_bytes) +
      kSegmentOverheadBytes + static_cast<double>(env.ByteSizeLong()) +
      static_cast<double>(spec.name().size());

  // An actor holds the policy, the rollout being filled, the encoded copy
  // in flight, and the envs' state and inference activations (both trunks).
  f.actor_bytes =
      f.policy_bytes + 2 * f.segment_bytes +
      e *
          (4 * obs + cnn_activations + central_input + 2 * hidden_sum +
           2 * actions + core_activations + t * RecurrentStateSize(policy)) *
          kFloat +
      // A central critic values a segment's truncated steps with their
      // copies: one forward over its T x E rows, both trunks and a core.
      (central_input > 0 ? t * e *
                               (obs + cnn_activations + central_input +
                                2 * hidden_sum + core_activations) *
                               kFloat
                         : 0);
  // (The inference activations include the observations as float32.)

  // A learner rank holds weights, gradients and Adam's two moments; its
  // actors' segments as received, the assembled rollout and the flattened
  // batch with advantages and returns; and one minibatch's activations
  // (both trunks, forward and backward).
  const double actors_here = ActorsPerLearner(spec);
  const double batch_rows = actors_here * t * e;
  const double minibatch_rows =
      batch_rows / std::max(1, spec.ppo().num_minibatches());
  f.learner_bytes = 4 * f.parameters * kFloat +
                    3 * actors_here * f.segment_bytes +
                    batch_rows * 4 * kFloat +
                    minibatch_rows *
                        (obs + 2 * cnn_activations + 2 * central_input +
                         4 * hidden_sum + actions + 2 * core_activations) *
                        kFloat;
  return f;
}

}  // namespace

RunFootprint EstimateRunFootprint(const RunSpec& spec) {
  if (spec.policies_size() == 0) return OnePolicyFootprint(spec);
  // Several policies (a policies block): each policy's network as its own
  // run builds it. One publication carries every policy's weights; an
  // actor and a learner hold every policy, the rollout and the batch once.
  // Each policy's activations are counted over all rows (it acts on its
  // agents' only): on the large side.
  const double actors_here = ActorsPerLearner(spec);
  const double batch_rows = actors_here * std::max(1, spec.segment_length()) *
                            std::max(1, spec.envs_per_actor());
  RunFootprint f;
  std::vector<RunFootprint> each;
  for (int k = 0; k < spec.policies_size(); ++k) {
    each.push_back(OnePolicyFootprint(NamedPolicyRun(spec, k)));
    f.segment_bytes = std::max(f.segment_bytes, each.back().segment_bytes);
  }
  for (const RunFootprint& p : each) {
    f.parameters += p.parameters;
    f.policy_bytes += p.policy_bytes;
    f.actor_bytes += p.actor_bytes - 2 * p.segment_bytes;
    f.learner_bytes += p.learner_bytes - 3 * actors_here * p.segment_bytes -
                       batch_rows * 4 * kFloat;
  }
  f.actor_bytes += 2 * f.segment_bytes;
  f.learner_bytes +=
      3 * actors_here * f.segment_bytes + batch_rows * 4 * kFloat;
  // A learner per policy: the run's learner sends policy k its agents'
  // rows of each batch in one message, to every such policy at once (each
  // message built, then serialised by gRPC: twice its bytes held).
  if (spec.resources().learner_per_policy()) {
    const std::vector<int> policy_of_agent = PolicyOfAgent(spec);
    const double agents = std::max<size_t>(1, policy_of_agent.size());
    for (int k = 1; k < spec.policies_size(); ++k) {
      const double share =
          std::count(policy_of_agent.begin(), policy_of_agent.end(), k) /
          agents;
      const double bytes = actors_here * f.segment_bytes * share;
      f.learner_bytes += 2 * bytes;
      if (bytes > f.policy_rows_bytes) {
        f.policy_rows_bytes = bytes;
        f.policy_rows_name = spec.policies(k).name();
      }
    }
  }
  return f;
}

absl::Status CheckRunFootprint(const RunSpec& spec, const RunFootprint& need,
                               const FootprintLimits& limits) {
  std::vector<std::string> problems;
  auto over = [](double need, double limit) {
    return limit > 0 && need > limit;
  };
  if (over(need.segment_bytes, limits.max_message_bytes)) {
    problems.push_back(absl::StrCat(
        "envs_per_actor x segment_length: one rollout segment (",
        spec.envs_per_actor(), " envs x ", spec.segment_length(),
        " steps x observation size ", spec.env().observation_size(),
        ") is about ", FormatBytes(need.segment_bytes), ", over the ",
        FormatBytes(limits.max_message_bytes),
        " message limit; use fewer envs_per_actor or a shorter "
        "segment_length"));
  }
  // What sizes the network: the hidden layers, and a CNN's image.
  std::string network =
      IsCnnEncoder(spec.policy())
          ? "policy.encoder, env.observation_shape, policy.hidden_sizes"
          : "policy.hidden_sizes";
  if (HasRecurrentCore(spec.policy())) network += ", policy.core_size";
  if (spec.policies_size() > 0) {
    // Each policy's own network, where its policy block sets one.
    network += ", policies[].policy";
  }
  if (over(need.policy_bytes, limits.max_message_bytes)) {
    problems.push_back(absl::StrCat(
        network, ": ",
        spec.policies_size() > 0
            ? absl::StrCat("the run's ", spec.policies_size(), " policies have")
            : std::string("the policy has"),
        " about ", absl::StrFormat("%.4g", need.parameters), " parameters (",
        FormatBytes(need.policy_bytes), " per publication), over the ",
        FormatBytes(limits.max_message_bytes), " message limit"));
  }
  if (over(need.policy_rows_bytes, limits.max_message_bytes)) {
    problems.push_back(absl::StrCat(
        "resources.learner_per_policy: policy ", need.policy_rows_name,
        "'s rows of one update (its agents' share of ", ActorsPerLearner(spec),
        " actors' segments) are about ", FormatBytes(need.policy_rows_bytes),
        " in one message to its learner, over the ",
        FormatBytes(limits.max_message_bytes),
        " message limit; use fewer envs_per_actor, a shorter "
        "segment_length, or fewer resources.num_actors"));
  }
  if (over(need.actor_bytes, limits.max_actor_bytes)) {
    problems.push_back(absl::StrCat(
        "envs_per_actor, segment_length, ", network, ": one actor needs about ",
        FormatBytes(need.actor_bytes), ", over the ",
        FormatBytes(limits.max_actor_bytes), " actor memory limit"));
  }
  if (over(need.learner_bytes, limits.max_learner_bytes)) {
    problems.push_back(absl::StrCat(
        "resources.num_actors / resources.num_learners, envs_per_actor, "
        "segment_length, ",
        network, ": one learner rank needs about ",
        FormatBytes(need.learner_bytes), ", over the ",
        FormatBytes(limits.max_learner_bytes), " learner memory limit"));
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(problems, "; "));
}

std::string FormatBytes(double bytes) {
  static const char* const kUnits[] = {"B",   "KiB", "MiB", "GiB",
                                       "TiB", "PiB", "EiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 6) {
    bytes /= 1024;
    ++unit;
  }
  if (unit == 0) return absl::StrFormat("%.0f B", bytes);
  return absl::StrFormat("%.3g %s", bytes, kUnits[unit]);
}

}  // namespace rl
