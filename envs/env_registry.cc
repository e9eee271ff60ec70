#include "envs/env_registry.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "envs/env_batch.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/util/message_differencer.h"

namespace rl {
namespace {

struct Entry {
  EnvKind kind;
  EnvSpec spec;
};

// The row of the physics `Env`, from its own constants (envs/cartpole.h
// and the others: Gymnasium 1.0.0's spaces, time limits and rewards).
template <typename Env>
EnvSpec SpecOf() {
  EnvSpec spec;
  spec.set_id(Env::kId);
  spec.set_observation_size(Env::kObsSize);
  spec.set_num_discrete_actions(Env::kNumActions);
  spec.set_continuous_action_size(Env::kActionSize);
  spec.set_action_low(Env::kActionLow);
  spec.set_action_high(Env::kActionHigh);
  spec.set_max_episode_steps(Env::kMaxEpisodeSteps);
  spec.set_reward_low(Env::kRewardLow);
  spec.set_reward_high(Env::kRewardHigh);
  return spec;
}

const std::vector<Entry>& Entries() {
  static const auto* entries = [] {
    auto* rows = new std::vector<Entry>;
    for (const EnvKind kind :
         {EnvKind::kCartPole, EnvKind::kAcrobot, EnvKind::kMountainCar,
          EnvKind::kPendulum, EnvKind::kMountainCarContinuous}) {
      VisitEnvKind(kind, [&](auto env) {
        rows->push_back({kind, SpecOf<decltype(env)>()});
      });
    }
    return rows;
  }();
  return *entries;
}

absl::Status Disagrees(absl::string_view field, absl::string_view id,
                       double want, double got) {
  return absl::InvalidArgumentError(
      absl::StrCat("env.", field, ": ", id, " has ", want, " (got ", got, ")"));
}

// a * b for a, b >= 0, at most `limit` (no overflow).
int64_t SaturatingProduct(int64_t a, int64_t b, int64_t limit) {
  if (a == 0 || b == 0) return 0;
  return b > limit / a ? limit : std::min(a * b, limit);
}

// A Dict or Tuple observation's parts (env.observation_parts): checked,
// and the flat observation's size and dtype filled from them.
void ResolveObservationParts(EnvSpec* env, std::vector<std::string>* problems) {
  const std::string path = "env.observation_parts";
  if (env->observation_parts_size() > kMaxObservationParts) {
    problems->push_back(absl::StrCat(path, ": at most ", kMaxObservationParts,
                                     " parts (got ",
                                     env->observation_parts_size(), ")"));
    return;
  }
  if (env->observation_shape_size() > 0) {
    problems->push_back(absl::StrCat(
        "env.observation_shape: a Dict or Tuple observation's shape is its "
        "parts' (",
        path, "); give one of them"));
    return;
  }
  int64_t elements = 0;
  bool bytes = true;
  std::set<std::string> names;
  for (int i = 0; i < env->observation_parts_size(); ++i) {
    ObservationPart* part = env->mutable_observation_parts(i);
    const std::string at = absl::StrCat(path, "[", i, "]");
    if (part->name().empty() || part->name().size() > 64) {
      problems->push_back(absl::StrCat(at, ".name: 1 to 64 characters (got ",
                                       part->name().size(), ")"));
    } else if (!names.insert(part->name()).second) {
      problems->push_back(absl::StrCat(at, ".name: \"", part->name(),
                                       "\" names an earlier part too"));
    }
    if (part->dtype().empty()) part->set_dtype("float32");
    if (part->dtype() != "float32" && part->dtype() != "uint8") {
      problems->push_back(absl::StrCat(at, ".dtype: \"",
                                       part->dtype().substr(0, 64),
                                       "\" is not \"float32\" or \"uint8\""));
    }
    bytes &= part->dtype() == "uint8";
    if (part->shape_size() < 1 || part->shape_size() > 8) {
      problems->push_back(absl::StrCat(at, ".shape: 1 to 8 dimensions (got ",
                                       part->shape_size(), ")"));
      continue;
    }
    int64_t n = 1;
    for (int d = 0; d < part->shape_size(); ++d) {
      if (part->shape(d) < 1) {
        problems->push_back(absl::StrCat(
            at, ".shape[", d, "]: must be >= 1 (got ", part->shape(d), ")"));
        n = 0;
        break;
      }
      n = SaturatingProduct(n, part->shape(d), int64_t{1} << 40);
    }
    elements = std::min<int64_t>(elements + n, int64_t{1} << 40);
  }
  if (elements > kMaxObservationElements) {
    problems->push_back(absl::StrCat(path, ": at most ",
                                     kMaxObservationElements,
                                     " elements in all (got ", elements, ")"));
    return;
  }
  if (env->observation_size() != 0 && env->observation_size() != elements) {
    problems->push_back(absl::StrCat(
        "env.observation_size: ", env->observation_size(), " disagrees with ",
        path, " (", elements, " elements); give one of them"));
    return;
  }
  const std::string dtype = bytes ? "uint8" : "float32";
  if (!env->observation_dtype().empty() && env->observation_dtype() != dtype) {
    problems->push_back(absl::StrCat(
        "env.observation_dtype: ", env->observation_dtype().substr(0, 64),
        " disagrees with ", path, ": their flat vector is ", dtype,
        bytes ? " (every part is uint8)"
              : " (uint8 only when every part is; a uint8 part travels as "
                "floats)"));
    return;
  }
  env->set_observation_size(static_cast<int32_t>(elements));
  env->set_observation_dtype(dtype);
}

// A plugin env's spec: declared by the run file, checked here (the
// coordinator cannot load the plugin; actors check the plugin against it).
absl::Status ResolvePluginEnvSpec(EnvSpec* env) {
  std::vector<std::string> problems;
  auto problem = [&](absl::string_view field, absl::string_view what,
                     double got) {
    problems.push_back(
        absl::StrCat("env.", field, ": ", what, " (got ", got, ")"));
  };
  if (env->id().empty()) {
    problems.push_back(
        "env.id: required (the name the plugin is asked to create)");
  } else if (env->id().size() > 256) {
    problem("id", "at most 256 characters", env->id().size());
  }
  if (env->plugin().size() > 4096) {
    problem("plugin", "at most 4096 characters", env->plugin().size());
  }
  if (env->observation_parts_size() > 0) {
    ResolveObservationParts(env, &problems);
  }
  if (env->observation_shape_size() > 8) {
    problem("observation_shape", "at most 8 dimensions",
            env->observation_shape_size());
  } else if (env->observation_shape_size() > 0) {
    int64_t elements = 1;
    bool ok = true;
    for (int i = 0; i < env->observation_shape_size(); ++i) {
      const int32_t d = env->observation_shape(i);
      if (d < 1) {
        problem(absl::StrCat("observation_shape[", i, "]"), "must be >= 1", d);
        ok = false;
      } else {
        elements = SaturatingProduct(elements, d, int64_t{1} << 40);
      }
    }
    if (ok && elements > kMaxObservationElements) {
      problem(
          "observation_shape",
          absl::StrCat("at most ", kMaxObservationElements, " elements in all"),
          static_cast<double>(elements));
    } else if (ok && env->observation_size() != 0 &&
               env->observation_size() != elements) {
      problems.push_back(
          absl::StrCat("env.observation_size: ", env->observation_size(),
                       " disagrees with env.observation_shape [",
                       absl::StrJoin(env->observation_shape(), ", "), "] (",
                       elements, " elements); give one of them"));
    } else if (ok) {
      env->set_observation_size(static_cast<int32_t>(elements));
    }
  }
  if (env->observation_size() < 1) {
    if (env->observation_shape_size() == 0 &&
        env->observation_parts_size() == 0) {
      problem("observation_size",
              "a plugin env declares its spaces: must be >= 1 (the number "
              "of observation elements; or give env.observation_shape)",
              env->observation_size());
    }
  } else if (env->observation_size() > kMaxObservationElements) {
    problem("observation_size",
            absl::StrCat("at most ", kMaxObservationElements),
            env->observation_size());
  }
  if (!env->observation_dtype().empty() &&
      env->observation_dtype() != "float32" &&
      env->observation_dtype() != "uint8") {
    problems.push_back(absl::StrCat("env.observation_dtype: \"",
                                    env->observation_dtype().substr(0, 64),
                                    "\" is not \"float32\" or \"uint8\""));
  }
  if (env->action_binary() < 0 || env->action_binary() > 64) {
    problem("action_binary", "MultiBinary(n) of n in [1, 64]",
            env->action_binary());
  } else if (env->action_binary() > 0) {
    // The bits as MultiDiscrete parts of 2 (filled in; given, they agree).
    const std::vector<int32_t> bits(env->action_binary(), 2);
    if (env->action_nvec_size() == 0) {
      env->mutable_action_nvec()->Add(bits.begin(), bits.end());
    } else if (!std::equal(env->action_nvec().begin(), env->action_nvec().end(),
                           bits.begin(), bits.end())) {
      problems.push_back(absl::StrCat(
          "env.action_nvec: [", absl::StrJoin(env->action_nvec(), ", "),
          "] disagrees with env.action_binary ", env->action_binary(),
          " (its bits are parts of 2); give one of them"));
    }
  }
  const bool single = env->num_discrete_actions() != 0;
  const bool multi = env->action_nvec_size() > 0;
  const bool discrete = single || multi;
  const bool continuous = env->continuous_action_size() != 0;
  if (int(single) + int(multi) + int(continuous) != 1) {
    problems.push_back(
        "env: a plugin env declares exactly one of num_discrete_actions "
        "(Discrete(n)), action_nvec (MultiDiscrete) and "
        "continuous_action_size (Box of that many floats)");
  }
  if (env->action_nvec_size() > 64) {
    problem("action_nvec", "at most 64 parts", env->action_nvec_size());
  }
  for (int i = 0; i < env->action_nvec_size(); ++i) {
    if (env->action_nvec(i) < 1 || env->action_nvec(i) > (1 << 20)) {
      problem(absl::StrCat("action_nvec[", i, "]"), "must be in [1, 2^20]",
              env->action_nvec(i));
    }
  }
  if (env->num_discrete_actions() < 0) {
    problem("num_discrete_actions", "must be >= 1",
            env->num_discrete_actions());
  }
  if (env->continuous_action_size() < 0) {
    problem("continuous_action_size", "must be >= 1",
            env->continuous_action_size());
  }
  if (env->action_mask() && !discrete) {
    problems.push_back(
        "env.action_mask: masks are for discrete actions "
        "(num_discrete_actions)");
  }
  if (discrete && (env->action_low() != 0 || env->action_high() != 0)) {
    problems.push_back(
        "env.action_low/action_high: only for continuous actions");
  }
  if (continuous &&
      !(std::isfinite(env->action_low()) && std::isfinite(env->action_high()) &&
        env->action_low() < env->action_high())) {
    problems.push_back(absl::StrCat(
        "env.action_low/action_high: a plugin with continuous actions "
        "declares finite bounds with action_low < action_high (got ",
        env->action_low(), ", ", env->action_high(), ")"));
  }
  if (env->reward_low() == 0 && env->reward_high() == 0) {
    env->set_reward_low(-std::numeric_limits<float>::infinity());
    env->set_reward_high(std::numeric_limits<float>::infinity());
  } else if (!(env->reward_low() <= env->reward_high())) {
    problems.push_back(absl::StrCat(
        "env.reward_low/reward_high: reward_low must be <= reward_high (got ",
        env->reward_low(), ", ", env->reward_high(), ")"));
  }
  if (env->max_episode_steps() < 0) {
    problem("max_episode_steps", "must be >= 0", env->max_episode_steps());
  }
  if (!problems.empty()) {
    return absl::InvalidArgumentError(absl::StrJoin(problems, "; "));
  }
  return absl::OkStatus();
}

}  // namespace

bool ObservationsAreBytes(const EnvSpec& env) {
  return env.observation_dtype() == "uint8";
}

std::vector<int64_t> ObservationShape(const EnvSpec& env) {
  if (env.observation_shape_size() == 0) return {env.observation_size()};
  return std::vector<int64_t>(env.observation_shape().begin(),
                              env.observation_shape().end());
}

std::vector<int64_t> DiscreteActionParts(const EnvSpec& env) {
  if (env.action_nvec_size() > 0) {
    return std::vector<int64_t>(env.action_nvec().begin(),
                                env.action_nvec().end());
  }
  if (env.num_discrete_actions() > 0) return {env.num_discrete_actions()};
  return {};
}

int64_t ActionMaskSize(const EnvSpec& env) {
  int64_t n = 0;
  for (const int64_t part : DiscreteActionParts(env)) n += part;
  return n;
}

const std::vector<std::string>& RegisteredEnvIds() {
  static const auto* ids = [] {
    auto* out = new std::vector<std::string>;
    for (const Entry& e : Entries()) out->push_back(e.spec.id());
    return out;
  }();
  return *ids;
}

absl::StatusOr<EnvKind> FindEnvKind(absl::string_view id) {
  for (const Entry& e : Entries()) {
    if (e.spec.id() == id) return e.kind;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown environment id \"", id,
                   "\"; known ids: ", absl::StrJoin(RegisteredEnvIds(), ", ")));
}

const EnvSpec& RegisteredEnv(EnvKind kind) {
  for (const Entry& e : Entries()) {
    if (e.kind == kind) return e.spec;
  }
  static const EnvSpec* const none = new EnvSpec();
  return *none;
}

namespace {

// FNV-1a (64 bits) of `message`'s deterministic serialisation, continuing
// from `hash`: stable across processes and builds of one schema (map
// fields, the kwargs' Struct, in key order).
uint64_t HashMessage(const google::protobuf::Message& message, uint64_t hash) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream out(&stream);
    out.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&out);
  }
  for (const unsigned char c : bytes) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

absl::Status ResolveEnvSpecFields(EnvSpec* env);

}  // namespace

uint64_t EnvSpecFingerprint(const EnvSpec& env) {
  EnvSpec unmarked = env;
  unmarked.clear_resolved_fingerprint();
  uint64_t hash = HashMessage(unmarked, 14695981039346656037ull);
  if (env.plugin().empty()) {
    if (absl::StatusOr<EnvKind> kind = FindEnvKind(env.id()); kind.ok()) {
      hash = HashMessage(RegisteredEnv(*kind), hash);
    }
  }
  return hash == 0 ? 1 : hash;
}

absl::Status ResolveEnvSpec(EnvSpec* env) {
  env->clear_resolved_fingerprint();
  RETURN_IF_ERROR(ResolveEnvSpecFields(env));
  env->set_resolved_fingerprint(EnvSpecFingerprint(*env));
  return absl::OkStatus();
}

namespace {

absl::Status ResolveEnvSpecFields(EnvSpec* env) {
  if (!env->plugin().empty()) return ResolvePluginEnvSpec(env);
  if (env->kwargs().fields_size() > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "env.kwargs: only a plugin env (env.plugin) takes kwargs; \"",
        env->id(), "\" is built in"));
  }
  absl::StatusOr<EnvKind> kind = FindEnvKind(env->id());
  if (!kind.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("env.id: ", kind.status().message()));
  }
  if (env->action_mask()) {
    return absl::InvalidArgumentError(
        absl::StrCat("env.action_mask: ", env->id(),
                     " writes no action masks (plugins only)"));
  }
  if (env->action_nvec_size() > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "env.action_nvec: ", env->id(), " has no MultiDiscrete actions"));
  }
  if (env->episodic_life()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "env.episodic_life: ", env->id(), " has no lives (plugins only)"));
  }
  if (env->observation_parts_size() > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("env.observation_parts: ", env->id(),
                     " observes one vector (parts are for plugins)"));
  }
  if (env->action_binary() != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "env.action_binary: ", env->id(), " has no MultiBinary actions"));
  }
  if (env->observation_shape_size() > 0 ||
      (!env->observation_dtype().empty() &&
       env->observation_dtype() != "float32")) {
    return absl::InvalidArgumentError(
        absl::StrCat("env.observation_shape/observation_dtype: ", env->id(),
                     " observes a float32 vector of ",
                     RegisteredEnv(*kind).observation_size(),
                     " (these fields are for plugins)"));
  }
  const EnvSpec& want = RegisteredEnv(*kind);
  struct Field {
    const char* name;
    double want;
    double got;
  };
  for (const Field& f :
       {Field{"observation_size", static_cast<double>(want.observation_size()),
              static_cast<double>(env->observation_size())},
        Field{"num_discrete_actions",
              static_cast<double>(want.num_discrete_actions()),
              static_cast<double>(env->num_discrete_actions())},
        Field{"continuous_action_size",
              static_cast<double>(want.continuous_action_size()),
              static_cast<double>(env->continuous_action_size())},
        Field{"action_low", want.action_low(), env->action_low()},
        Field{"action_high", want.action_high(), env->action_high()},
        Field{"reward_low", want.reward_low(), env->reward_low()},
        Field{"reward_high", want.reward_high(), env->reward_high()}}) {
    if (f.got != 0 && f.got != f.want) {
      return Disagrees(f.name, want.id(), f.want, f.got);
    }
  }
  if (env->max_episode_steps() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("env.max_episode_steps: must be >= 0 (got ",
                     env->max_episode_steps(), ")"));
  }
  const int max_episode_steps = env->max_episode_steps();
  *env = want;
  if (max_episode_steps > 0) env->set_max_episode_steps(max_episode_steps);
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckResolvedEnvSpec(const EnvSpec& env) {
  if (env.observation_size() == 0 ||
      (env.plugin().empty() && env.max_episode_steps() == 0) ||
      (!env.plugin().empty() && env.reward_low() == 0 &&
       env.reward_high() == 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "env: the spec of \"", env.id(),
        "\" is not resolved (observation_size and max_episode_steps are "
        "filled in by the coordinator or rl_local; a worker takes them as "
        "given)"));
  }
  // Resolved by the service and unchanged since: nothing to resolve again.
  if (env.resolved_fingerprint() != 0 &&
      env.resolved_fingerprint() == EnvSpecFingerprint(env)) {
    return absl::OkStatus();
  }
  // No fingerprint (stored before them), or edited since (a test's plugin
  // path, say): resolved again and compared, which names a disagreeing
  // field.
  EnvSpec resolved = env;
  resolved.clear_resolved_fingerprint();
  RETURN_IF_ERROR(ResolveEnvSpecFields(&resolved));
  EnvSpec given = env;
  given.clear_resolved_fingerprint();
  // Every derived field was filled and agreed: resolving changed nothing.
  if (!google::protobuf::util::MessageDifferencer::Equals(resolved, given)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "env: the spec of \"", env.id(), "\" lacks fields the registry fills ",
        "(resolved: ", resolved.ShortDebugString(),
        "; given: ", given.ShortDebugString(), ")"));
  }
  return absl::OkStatus();
}

}  // namespace rl
