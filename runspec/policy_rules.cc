#include "runspec/policy_rules.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/json_quote.h"
#include "runspec/field_problems.h"

namespace rl {
namespace {

// The images a CNN would read: the observation's shape (a uint8 one of 3
// dimensions), or each such part of a Dict or Tuple observation.
std::vector<std::vector<int>> Images(const EnvSpec& env) {
  std::vector<std::vector<int>> images;
  if (env.observation_parts_size() > 0) {
    for (const ObservationPart& part : env.observation_parts()) {
      if (part.dtype() == "uint8" && part.shape_size() == 3) {
        images.emplace_back(part.shape().begin(), part.shape().end());
      }
    }
  } else if (env.observation_dtype() == "uint8" &&
             env.observation_shape_size() == 3) {
    images.emplace_back(env.observation_shape().begin(),
                        env.observation_shape().end());
  }
  return images;
}

// Whether every image guesses the same layout: a few channels last is HWC.
bool LayoutsAgree(const std::vector<std::vector<int>>& images) {
  for (const std::vector<int>& image : images) {
    if ((image[2] <= 4) != (images[0][2] <= 4)) return false;
  }
  return true;
}

// Whether a Dict observation has a uint8 part.
bool HasBytePart(const EnvSpec& env) {
  for (const ObservationPart& part : env.observation_parts()) {
    if (part.dtype() == "uint8") return true;
  }
  return false;
}

// The height and width of an image read in `layout`.
std::pair<int, int> ImageSize(const std::vector<int>& image, bool hwc) {
  return {image[hwc ? 0 : 1], image[hwc ? 1 : 2]};
}

// Problems of the encoder (and the image layout it reads).
void EncoderProblems(const RunSpec& spec, std::vector<std::string>* out) {
  const PolicyConfig& policy = spec.policy();
  const EnvSpec& env = spec.env();
  const bool cnn = IsCnnEncoder(policy);
  const std::string encoder = JsonQuote(policy.encoder());
  if (!cnn && policy.encoder() != "mlp") {
    out->push_back(FieldProblem(
        "policy.encoder", "must be mlp, nature_cnn or impala_cnn", encoder));
  } else if (cnn && env.observation_parts_size() > 0 && Images(env).empty()) {
    out->push_back(FieldProblem(
        "policy.encoder",
        absl::StrCat(policy.encoder(),
                     " reads images: no part of env.observation_parts is "
                     "uint8 with 3 dimensions"),
        encoder));
  } else if (cnn && env.observation_parts_size() == 0 &&
             env.observation_dtype() != "uint8") {
    out->push_back(FieldProblem(
        "policy.encoder",
        absl::StrCat(policy.encoder(),
                     " reads uint8 images (scaled to [0, 1] inside); this "
                     "run's env.observation_dtype is ",
                     env.observation_dtype().empty() ? "float32"
                                                     : env.observation_dtype()),
        encoder));
  } else if (cnn && env.observation_parts_size() == 0 &&
             env.observation_shape_size() != 3) {
    out->push_back(FieldProblem(
        "policy.encoder",
        absl::StrCat(policy.encoder(),
                     " reads images: env.observation_shape must have 3 "
                     "dimensions (height, width, channels or channels, "
                     "height, width); it has ",
                     env.observation_shape_size()),
        encoder));
  } else if (cnn) {
    if (policy.image_layout().empty() && !LayoutsAgree(Images(env))) {
      out->push_back(FieldProblem(
          "policy.image_layout",
          "the image parts of env.observation_parts read as different "
          "layouts (a few channels last is hwc); give hwc or chw for all",
          JsonQuote(policy.image_layout())));
    } else if (policy.image_layout() != "hwc" &&
               policy.image_layout() != "chw") {
      out->push_back(FieldProblem("policy.image_layout", "must be hwc or chw",
                                  JsonQuote(policy.image_layout())));
    } else {
      for (const std::vector<int>& image : Images(env)) {
        const auto [h, w] = ImageSize(image, policy.image_layout() == "hwc");
        if (policy.encoder() == "nature_cnn" && (h < 36 || w < 36)) {
          out->push_back(FieldProblem(
              "policy.encoder",
              absl::StrCat("nature_cnn needs images of at least 36x36; "
                           "this one is ",
                           h, "x", w, " (impala_cnn takes any size)"),
              encoder));
          break;
        }
      }
    }
  }
  if (!cnn && !policy.image_layout().empty()) {
    out->push_back(FieldProblem("policy.image_layout",
                                "is for a CNN encoder (policy.encoder)",
                                JsonQuote(policy.image_layout())));
  }
}

// Problems of the recurrent core.
void CoreProblems(const RunSpec& spec, std::vector<std::string>* out) {
  const PolicyConfig& policy = spec.policy();
  if (policy.core() != "none" && !HasRecurrentCore(policy)) {
    out->push_back(FieldProblem("policy.core", "must be none, lstm or gru",
                                JsonQuote(policy.core())));
    return;
  }
  if (policy.core_size() < 1 || policy.core_size() > 4096) {
    out->push_back(FieldProblem("policy.core_size", "must be in [1, 4096]",
                                policy.core_size()));
  }
  // Several policies: each learns from its own rows, whose rule is theirs
  // (named_policies.cc); a number that divides every policy's rows divides
  // envs_per_actor too.
  const int minibatches = spec.ppo().num_minibatches();
  if (HasRecurrentCore(policy) && minibatches >= 1 &&
      spec.policies_size() == 0 && spec.envs_per_actor() % minibatches != 0) {
    out->push_back(absl::StrCat(
        kWholeSequencesProblem, policy.core(),
        ") learns from whole env sequences: num_minibatches must divide "
        "envs_per_actor (",
        spec.envs_per_actor(), ") (got ", minibatches, ")"));
  }
}

// Problems of a central critic (policy.central_value). A league's and a
// policies block's are theirs (league_rules.cc, named_policies.cc).
void CentralValueProblems(const RunSpec& spec, std::vector<std::string>* out) {
  const PolicyConfig& policy = spec.policy();
  if (!policy.central_value()) return;
  const int agents = spec.env().agents_per_env();
  const char* field = "policy.central_value";
  if (agents < 2) {
    out->push_back(FieldProblem(
        field,
        "reads every agent's observation: it needs an environment of "
        "several agents (env.agents_per_env >= 2)",
        absl::StrCat("env.agents_per_env ", std::max(agents, 1))));
    return;
  }
  // (A core's trunk is shared anyway: its value head reads the cores.)
  if (policy.shared_trunk() && !HasRecurrentCore(policy)) {
    out->push_back(FieldProblem(
        field,
        "the value network reads every agent's observation and the policy "
        "its own: they cannot share a trunk (policy.shared_trunk)",
        "true"));
  }
  if (spec.execution().cpu_kernels() == "fused" && spec.env().agents_leave()) {
    out->push_back(FieldProblem(
        "execution.cpu_kernels",
        "fused leaves out the rows of agents that left (env.agents_leave), "
        "and a central critic (policy.central_value) learns from whole "
        "copies; leave cpu_kernels out: auto takes LibTorch for it",
        JsonQuote(spec.execution().cpu_kernels())));
  }
  // Minibatches of whole copies at a step: num_minibatches divides them.
  // A recurrent policy's minibatches are whole env sequences: of whole
  // copies.
  const int minibatches = spec.ppo().num_minibatches();
  const int64_t copies = static_cast<int64_t>(spec.envs_per_actor()) / agents;
  if (HasRecurrentCore(policy)) {
    if (minibatches >= 1 && copies % minibatches != 0) {
      out->push_back(FieldProblem(
          "ppo.num_minibatches",
          absl::StrCat("a central critic (policy.central_value) beside a "
                       "recurrent core learns from the whole sequences of "
                       "whole environment copies: num_minibatches must "
                       "divide the ",
                       copies,
                       " copies of an actor (envs_per_actor / "
                       "env.agents_per_env)"),
          minibatches));
    }
    return;
  }
  if (minibatches >= 1 && copies * spec.segment_length() % minibatches != 0) {
    out->push_back(FieldProblem(
        "ppo.num_minibatches",
        absl::StrCat("a central critic (policy.central_value) learns from "
                     "minibatches of whole environment copies: "
                     "num_minibatches must divide a segment's ",
                     copies * spec.segment_length(),
                     " copy steps (envs_per_actor / env.agents_per_env x "
                     "segment_length)"),
        minibatches));
  }
}

// The action heads of policy/action_head.h's registry and the actions each
// takes: "" where `env`'s fit, else why not (the registry's own Fits says
// the same; //policy:action_head_test holds the two together).
struct HeadRule {
  const char* name;
  std::string (*misfit)(const EnvSpec& env);
};

bool Bits(const EnvSpec& env) {
  bool bits = env.action_nvec_size() > 0;
  for (const int n : env.action_nvec()) bits = bits && n == 2;
  return bits;
}

const HeadRule kHeadRules[] = {
    {"bernoulli",
     [](const EnvSpec& env) -> std::string {
       return Bits(env) ? "" : "it takes bits (MultiBinary)";
     }},
    {"categorical",
     [](const EnvSpec& env) -> std::string {
       return env.num_discrete_actions() > 0 || env.action_nvec_size() > 0
                  ? ""
                  : "it takes Discrete or MultiDiscrete actions";
     }},
    {"gaussian",
     [](const EnvSpec& env) -> std::string {
       return env.continuous_action_size() > 0 ? "" : "it takes Box actions";
     }},
    {"tanh_gaussian",
     [](const EnvSpec& env) -> std::string {
       if (env.continuous_action_size() <= 0) return "it takes Box actions";
       return std::isfinite(env.action_low()) &&
                      std::isfinite(env.action_high()) &&
                      env.action_low() < env.action_high()
                  ? ""
                  : "it squashes actions into finite bounds, and the env has "
                    "none";
     }},
};

// Problems of the action head.
void HeadProblems(const RunSpec& spec, std::vector<std::string>* out) {
  const std::string& head = spec.policy().head();
  if (head.empty()) return;
  for (const HeadRule& rule : kHeadRules) {
    if (head != rule.name) continue;
    const std::string misfit = rule.misfit(spec.env());
    if (!misfit.empty()) {
      out->push_back(FieldProblem(
          "policy.head",
          absl::StrCat(misfit, ": this env's actions do not fit it"),
          JsonQuote(head)));
    }
    return;
  }
  out->push_back(FieldProblem(
      "policy.head",
      absl::StrCat("must be one of ", absl::StrJoin(ActionHeadNames(), ", ")),
      JsonQuote(head)));
}

// Problems of execution.cpu_kernels against the network it would run.
void FusedProblems(const RunSpec& spec, std::vector<std::string>* out) {
  const ExecutionConfig& execution = spec.execution();
  const PolicyConfig& policy = spec.policy();
  const std::string kernels = JsonQuote(execution.cpu_kernels());
  if (execution.cpu_kernels() != "auto" && execution.cpu_kernels() != "fused" &&
      execution.cpu_kernels() != "libtorch") {
    out->push_back(FieldProblem("execution.cpu_kernels",
                                "must be auto, fused or libtorch", kernels));
    return;
  }
  if (execution.cpu_kernels() != "fused") return;
  const char* leave_out =
      " (leave cpu_kernels out: auto takes LibTorch for it)";
  if (execution.precision() == "bfloat16") {
    out->push_back(FieldProblem(
        "execution.cpu_kernels",
        absl::StrCat(
            "fused computes in float32; this run's execution.precision is "
            "bfloat16",
            leave_out),
        kernels));
    return;
  }
  if (spec.resources().learner_device() != "cpu" ||
      spec.resources().actor_device() != "cpu") {
    out->push_back(FieldProblem(
        "execution.cpu_kernels",
        "fused is the CPU path; this run's learner or actor device is not cpu",
        kernels));
  } else if (!policy.head().empty() && policy.head() != "categorical" &&
             policy.head() != "gaussian") {
    out->push_back(FieldProblem(
        "execution.cpu_kernels",
        absl::StrCat("fused has the categorical and gaussian heads; this "
                     "run's policy.head is ",
                     policy.head(), leave_out),
        kernels));
  } else if (policy.activation() == "relu") {
    out->push_back(
        FieldProblem("execution.cpu_kernels",
                     absl::StrCat("fused runs tanh networks only; this run's "
                                  "policy.activation is relu",
                                  leave_out),
                     kernels));
  } else if (IsCnnEncoder(policy) || HasRecurrentCore(policy) ||
             spec.env().observation_dtype() == "uint8" ||
             HasBytePart(spec.env())) {
    const std::string what =
        IsCnnEncoder(policy) ? "policy.encoder is a CNN"
        : HasRecurrentCore(policy)
            ? absl::StrCat("policy.core is ", policy.core())
        : HasBytePart(spec.env()) ? "a part of env.observation_parts is uint8"
                                  : "env.observation_dtype is uint8";
    out->push_back(FieldProblem(
        "execution.cpu_kernels",
        absl::StrCat("fused runs MLPs only, on float32 observations; this "
                     "run's ",
                     what, leave_out),
        kernels));
  }
}

}  // namespace

std::vector<std::string> ActionHeadNames() {
  std::vector<std::string> names;
  for (const HeadRule& rule : kHeadRules) names.push_back(rule.name);
  return names;
}

std::string ActionHeadMisfit(const std::string& head, const EnvSpec& env) {
  for (const HeadRule& rule : kHeadRules) {
    if (head == rule.name) return rule.misfit(env);
  }
  return "no such head";
}

bool IsCnnEncoder(const PolicyConfig& policy) {
  return policy.encoder() == "nature_cnn" || policy.encoder() == "impala_cnn";
}

bool HasRecurrentCore(const PolicyConfig& policy) {
  return policy.core() == "lstm" || policy.core() == "gru";
}

bool IsPolicyName(const std::string& name) {
  if (name.empty() || name.size() > 32) return false;
  for (const char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '-')) {
      return false;
    }
  }
  return true;
}

int64_t RecurrentStateSize(const PolicyConfig& policy) {
  if (!HasRecurrentCore(policy)) return 0;
  return (policy.core() == "lstm" ? 2 : 1) * int64_t{policy.core_size()};
}

void ApplyPolicyDefaults(const EnvSpec& env, const PPOConfig& ppo,
                         PolicyConfig* policy) {
  const std::vector<std::vector<int>> images = Images(env);
  const bool image = !images.empty();
  // The layout as given, else guessed from the first image: few channels
  // last is HWC.
  const bool hwc = policy->image_layout().empty()
                       ? image && images[0][2] <= 4
                       : policy->image_layout() == "hwc";
  if (policy->encoder().empty()) {
    // The Nature CNN where every image is large enough for it.
    bool large = image;
    for (const std::vector<int>& i : images) {
      const auto [h, w] = ImageSize(i, hwc);
      large &= h >= 36 && w >= 36;
    }
    policy->set_encoder(!image ? "mlp" : large ? "nature_cnn" : "impala_cnn");
  }
  const bool cnn = IsCnnEncoder(*policy);
  // Images that guess different layouts get none: the rules ask for one.
  if (cnn && policy->image_layout().empty() && image && LayoutsAgree(images)) {
    policy->set_image_layout(hwc ? "hwc" : "chw");
  }
  if (policy->core().empty()) policy->set_core("none");
  if (policy->core_size() == 0) policy->set_core_size(128);
  // A spec that still names the network under ppo keeps it for the error.
  // After a CNN, no hidden layers unless asked for; a Dict's parts meet
  // in two (as Stable-Baselines3's MultiInputPolicy).
  if ((!cnn || env.observation_parts_size() > 0) &&
      policy->hidden_sizes_size() == 0 && ppo.hidden_sizes_size() == 0) {
    policy->add_hidden_sizes(64);
    policy->add_hidden_sizes(64);
  }
  if (policy->activation().empty()) policy->set_activation("tanh");
}

std::vector<std::string> PolicyProblems(const RunSpec& spec) {
  std::vector<std::string> out;
  const PolicyConfig& policy = spec.policy();
  if (policy.hidden_sizes_size() > 16) {
    out.push_back(FieldProblem("policy.hidden_sizes", "at most 16 layers",
                               policy.hidden_sizes_size()));
  }
  for (int i = 0; i < policy.hidden_sizes_size(); ++i) {
    if (policy.hidden_sizes(i) < 1 || policy.hidden_sizes(i) > 65536) {
      out.push_back(FieldProblem(absl::StrCat("policy.hidden_sizes[", i, "]"),
                                 "must be in [1, 65536]",
                                 policy.hidden_sizes(i)));
    }
  }
  if (!(std::fabs(policy.initial_log_std()) <= 20)) {
    out.push_back(FieldProblem("policy.initial_log_std", "must be in [-20, 20]",
                               policy.initial_log_std()));
  }
  if (policy.activation() != "tanh" && policy.activation() != "relu") {
    out.push_back(FieldProblem("policy.activation", "must be tanh or relu",
                               JsonQuote(policy.activation())));
  }
  EncoderProblems(spec, &out);
  CoreProblems(spec, &out);
  CentralValueProblems(spec, &out);
  HeadProblems(spec, &out);
  FusedProblems(spec, &out);
  return out;
}

}  // namespace rl
