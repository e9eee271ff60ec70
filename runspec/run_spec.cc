// Run files -> RunSpec: the JSON of a run file's text (run_file_text.cc) read
// into a RunSpec with the moved fields and explicit counts checked, then
// defaults, validation, resolution of the environment, and loading from a
// file. Stored specs are brought up to date in stored_run_spec.cc.
#include "runspec/run_spec.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/json_quote.h"
#include "common/status.h"
#include "envs/env_agents.h"
#include "envs/env_registry.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "runspec/field_problems.h"
#include "runspec/league_rules.h"
#include "runspec/named_policies.h"
#include "runspec/policy_rules.h"

namespace rl {
namespace {

// Unicode characters of UTF-8 text: the bytes that are not continuations.
int64_t Utf8Chars(absl::string_view text) {
  int64_t n = 0;
  for (const char c : text) {
    if ((static_cast<unsigned char>(c) & 0xc0) != 0x80) ++n;
  }
  return n;
}

using Problems = FieldProblems;

// Counts that a left-out field takes a default for (ApplyRunSpecDefaults):
// written out as 0 or less they are an error, not the default.
constexpr std::pair<const char*, const char*> kCountsWithDefaults[] = {
    {"", "total_env_steps"},       {"", "envs_per_actor"},
    {"", "segment_length"},        {"", "keep_checkpoints"},
    {"ppo", "num_epochs"},         {"ppo", "num_minibatches"},
    {"resources", "num_learners"}, {"resources", "num_actors"},
    {"resources", "actor_threads"}};

// "num_epochs" -> "numEpochs" (the proto3 JSON name, also accepted).
std::string LowerCamel(absl::string_view name) {
  std::string out;
  bool upper = false;
  for (const char c : name) {
    if (c == '_') {
      upper = true;
    } else {
      out += upper ? absl::ascii_toupper(c) : c;
      upper = false;
    }
  }
  return out;
}

// The field `name` (snake_case or lowerCamelCase) of `object`, or null.
const google::protobuf::Value* FieldOf(const google::protobuf::Struct& object,
                                       const std::string& name) {
  for (const std::string& key : {name, LowerCamel(name)}) {
    const auto it = object.fields().find(key);
    if (it != object.fields().end()) return &it->second;
  }
  return nullptr;
}

// INVALID_ARGUMENT naming every count of kCountsWithDefaults that `json`
// (a run file as JSON text) writes out as 0 or less.
absl::Status CheckExplicitCounts(const std::string& json) {
  google::protobuf::Struct root;
  if (!google::protobuf::util::JsonStringToMessage(json, &root).ok()) {
    return absl::OkStatus();  // the RunSpec parse names what is wrong
  }
  Problems problems;
  for (const auto& [parent, name] : kCountsWithDefaults) {
    const google::protobuf::Struct* object = &root;
    if (*parent != '\0') {
      const google::protobuf::Value* v = FieldOf(root, parent);
      if (v == nullptr || !v->has_struct_value()) continue;
      object = &v->struct_value();
    }
    const google::protobuf::Value* v = FieldOf(*object, name);
    if (v == nullptr) continue;
    double value = 1;
    if (v->has_number_value()) {
      value = v->number_value();
    } else if (v->has_string_value() &&
               !absl::SimpleAtod(v->string_value(), &value)) {
      continue;  // not a number: the RunSpec parse says so
    }
    if (value <= 0) {
      problems.Add(*parent != '\0' ? absl::StrCat(parent, ".", name) : name,
                   "must be >= 1 (leave it out for the default)", value);
    }
  }
  return problems.ToStatus();
}

// The network's fields moved from ppo: to policy: (PolicyConfig).
constexpr const char* kMovedToPolicy[] = {"hidden_sizes", "shared_trunk",
                                          "initial_log_std"};

std::string MovedToPolicy(absl::string_view name) {
  return absl::StrCat("ppo.", name, ": moved to policy.", name,
                      " (the network has its own block: policy: {", name,
                      ": ...})");
}

// The execution settings moved from ppo: to execution: (ExecutionConfig).
constexpr const char* kMovedToExecution[] = {"cpu_kernels", "precision",
                                             "cuda_graphs"};

std::string MovedToExecution(absl::string_view name) {
  return absl::StrCat("ppo.", name, ": moved to execution.", name,
                      " (how a run executes has its own block: execution: {",
                      name, ": ...})");
}

// INVALID_ARGUMENT naming each network or execution field a run file still
// writes under ppo: (a run file as JSON text).
absl::Status CheckMovedFields(const std::string& json) {
  google::protobuf::Struct root;
  if (!google::protobuf::util::JsonStringToMessage(json, &root).ok()) {
    return absl::OkStatus();  // the RunSpec parse names what is wrong
  }
  const google::protobuf::Value* ppo = FieldOf(root, "ppo");
  if (ppo == nullptr || !ppo->has_struct_value()) return absl::OkStatus();
  std::vector<std::string> moved;
  for (const char* name : kMovedToPolicy) {
    if (FieldOf(ppo->struct_value(), name) != nullptr) {
      moved.push_back(MovedToPolicy(name));
    }
  }
  for (const char* name : kMovedToExecution) {
    if (FieldOf(ppo->struct_value(), name) != nullptr) {
      moved.push_back(MovedToExecution(name));
    }
  }
  if (moved.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(moved, "; "));
}

bool IsKnownDevice(const std::string& device) {
  if (device == "cpu" || device == "cuda") return true;
  int index;
  return absl::StartsWith(device, "cuda:") &&
         absl::SimpleAtoi(device.substr(5), &index) && index >= 0;
}

}  // namespace

absl::StatusOr<RunSpec> ParseRunSpec(absl::string_view text,
                                     RunFileFormat format) {
  ASSIGN_OR_RETURN(const std::string json, RunFileToJson(text, format));
  RETURN_IF_ERROR(CheckMovedFields(json));
  RETURN_IF_ERROR(CheckExplicitCounts(json));
  RunSpec spec;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto status =
      google::protobuf::util::JsonStringToMessage(json, &spec, options);
  if (!status.ok()) {
    // One line: protobuf's JSON errors may carry a caret drawing.
    const std::string message = status.message().as_string();
    std::vector<absl::string_view> words =
        absl::StrSplit(message, absl::ByAnyChar(" \t\r\n"), absl::SkipEmpty());
    while (!words.empty() && words.back() == "^") words.pop_back();
    return absl::InvalidArgumentError(
        absl::StrCat("run file: ", absl::StrJoin(words, " ")));
  }
  RunSpec defaulted = spec;
  ApplyRunSpecDefaults(&defaulted);
  RETURN_IF_ERROR(CheckPolicyDefaultsGiven(json, defaulted));
  return spec;
}

void ApplyRunSpecDefaults(RunSpec* spec) {
  // 8 rows, rounded up to whole environments of several agents.
  if (spec->envs_per_actor() == 0) {
    spec->set_envs_per_actor(WholeCopies(8, spec->env()));
  }
  if (spec->segment_length() == 0) spec->set_segment_length(128);
  if (spec->total_env_steps() == 0) spec->set_total_env_steps(1000000);
  if (spec->keep_checkpoints() == 0) spec->set_keep_checkpoints(3);
  if (spec->sync_mode() == SYNC_MODE_UNSPECIFIED) spec->set_sync_mode(SYNC);

  PPOConfig* ppo = spec->mutable_ppo();
  if (ppo->learning_rate() == 0) ppo->set_learning_rate(2.5e-4f);
  if (!ppo->has_anneal_learning_rate()) ppo->set_anneal_learning_rate(true);
  if (ppo->gamma() == 0) ppo->set_gamma(0.99f);
  if (!ppo->has_gae_lambda()) ppo->set_gae_lambda(0.95f);
  if (ppo->num_epochs() == 0) ppo->set_num_epochs(4);
  if (ppo->num_minibatches() == 0) ppo->set_num_minibatches(4);
  if (ppo->clip_coef() == 0) ppo->set_clip_coef(0.2f);
  if (!ppo->has_clip_value_loss()) ppo->set_clip_value_loss(true);
  if (!ppo->has_value_coef()) ppo->set_value_coef(0.5f);
  if (!ppo->has_entropy_coef()) ppo->set_entropy_coef(0.01f);
  if (!ppo->has_max_grad_norm()) ppo->set_max_grad_norm(0.5f);
  if (!ppo->has_normalize_advantages()) ppo->set_normalize_advantages(true);
  ExecutionConfig* execution = spec->mutable_execution();
  if (execution->cpu_kernels().empty()) execution->set_cpu_kernels("auto");
  if (execution->precision().empty()) execution->set_precision("auto");
  if (execution->cuda_graphs().empty()) execution->set_cuda_graphs("auto");
  if (execution->collective_backend().empty()) {
    execution->set_collective_backend("auto");
  }

  ApplyPolicyDefaults(spec->env(), *ppo, spec->mutable_policy());
  if (spec->has_league()) ApplyLeagueDefaults(spec->mutable_league());

  Resources* res = spec->mutable_resources();
  if (res->num_learners() == 0) res->set_num_learners(1);
  if (res->num_actors() == 0) res->set_num_actors(1);
  if (res->min_actors() == 0) res->set_min_actors(res->num_actors());
  if (res->learner_device().empty()) res->set_learner_device("cpu");
  if (res->actor_device().empty()) res->set_actor_device("cpu");
  if (res->actor_threads() == 0) res->set_actor_threads(1);
}

absl::Status ValidateRunSpec(const RunSpec& spec) {
  Problems p;
  const int64_t name_chars = Utf8Chars(spec.name());
  if (name_chars > kMaxRunNameChars) {
    p.Add("name", absl::StrCat("at most ", kMaxRunNameChars, " characters"),
          name_chars);
  } else if (std::any_of(spec.name().begin(), spec.name().end(), [](char c) {
               const auto b = static_cast<unsigned char>(c);
               return b < 0x20 || b == 0x7f;  // Tabs and newlines too.
             })) {
    p.Add("name", "no control characters", JsonQuote(spec.name()));
  }
  const auto& ids = RegisteredEnvIds();
  if (spec.env().id().empty()) {
    p.Add("env.id", "required, one of " + absl::StrJoin(ids, ", "), "nothing");
  } else if (spec.env().plugin().empty() &&
             std::find(ids.begin(), ids.end(), spec.env().id()) == ids.end()) {
    p.Add("env.id",
          "unknown environment, expected one of " + absl::StrJoin(ids, ", ") +
              " (or name an environment plugin in env.plugin)",
          JsonQuote(spec.env().id()));
  }
  if (!(spec.env().call_timeout_s() >= 0 &&
        spec.env().call_timeout_s() <= 86400)) {
    p.Add("env.call_timeout_s", "must be in [0, 86400] seconds (0: 120)",
          spec.env().call_timeout_s());
  }
  if (spec.env().max_episode_steps() < 0) {
    p.Add("env.max_episode_steps", "must be >= 0",
          spec.env().max_episode_steps());
  }
  if (spec.envs_per_actor() < 1 || spec.envs_per_actor() > (1 << 20)) {
    p.Add("envs_per_actor", "must be in [1, 1048576]", spec.envs_per_actor());
  }
  const int agents = spec.env().agents_per_env();
  if (agents < 0 || agents > kMaxAgentsPerEnv) {
    p.Add("env.agents_per_env",
          absl::StrCat("must be in [0, ", kMaxAgentsPerEnv, "] (0: 1)"),
          agents);
  } else if (agents > 1 && spec.env().plugin().empty()) {
    p.Add("env.agents_per_env",
          "the built-in environments have one agent; several need an "
          "environment plugin that declares them (env.plugin)",
          agents);
  } else if (agents > 1 && spec.envs_per_actor() % agents != 0) {
    p.Add("envs_per_actor",
          absl::StrCat("must be a multiple of env.agents_per_env (", agents,
                       "): it counts rows, each environment ", agents,
                       " of them"),
          spec.envs_per_actor());
  }
  if (spec.env().agents_leave()) {
    // Padding rows weigh 0 in the LibTorch update (of one learner or a
    // gang); what would run on through them, or count them, is refused.
    if (agents < 2) {
      p.Add("env.agents_leave",
            "needs several agents per environment (env.agents_per_env >= "
            "2): an agent leaves while the others of its environment play on",
            "true");
    } else if (spec.env().episodic_life()) {
      p.Add("env.agents_leave",
            "not with env.episodic_life (its games are counted from every "
            "row's flags)",
            "true");
    } else if (!(spec.env().reward_low() <= 0 &&
                 spec.env().reward_high() >= 0)) {
      p.Add("env.agents_leave",
            absl::StrCat("needs a reward range that holds 0 (env.reward_low ",
                         spec.env().reward_low(), ", reward_high ",
                         spec.env().reward_high(),
                         "): a row whose agent left is paid 0"),
            "true");
    }
  }
  if (spec.segment_length() < 1 || spec.segment_length() > 65536) {
    p.Add("segment_length", "must be in [1, 65536]", spec.segment_length());
  }
  if (spec.total_env_steps() < 1) {
    p.Add("total_env_steps", "must be >= 1", spec.total_env_steps());
  }

  const PPOConfig& ppo = spec.ppo();
  // Written as !(in range) so that NaN fails too.
  if (!(ppo.learning_rate() > 0 && ppo.learning_rate() < 1)) {
    p.Add("ppo.learning_rate", "must be in (0, 1)", ppo.learning_rate());
  }
  if (!(ppo.gamma() > 0 && ppo.gamma() <= 1)) {
    p.Add("ppo.gamma", "must be in (0, 1]", ppo.gamma());
  }
  if (!(ppo.gae_lambda() >= 0 && ppo.gae_lambda() <= 1)) {
    p.Add("ppo.gae_lambda", "must be in [0, 1]", ppo.gae_lambda());
  }
  if (ppo.num_epochs() < 1 || ppo.num_epochs() > 1000) {
    p.Add("ppo.num_epochs", "must be in [1, 1000]", ppo.num_epochs());
  }
  const int64_t batch =
      static_cast<int64_t>(spec.envs_per_actor()) * spec.segment_length();
  if (ppo.num_minibatches() < 1) {
    p.Add("ppo.num_minibatches", "must be >= 1", ppo.num_minibatches());
  } else if (batch > 0 && batch % ppo.num_minibatches() != 0) {
    p.Add("ppo.num_minibatches",
          absl::StrCat("must divide envs_per_actor*segment_length = ", batch),
          ppo.num_minibatches());
  }
  if (!(ppo.clip_coef() > 0 && ppo.clip_coef() < 10)) {
    p.Add("ppo.clip_coef", "must be in (0, 10)", ppo.clip_coef());
  }
  if (!(ppo.value_coef() >= 0 && std::isfinite(ppo.value_coef()))) {
    p.Add("ppo.value_coef", "must be finite and >= 0", ppo.value_coef());
  }
  if (!(ppo.entropy_coef() >= 0 && std::isfinite(ppo.entropy_coef()))) {
    p.Add("ppo.entropy_coef", "must be finite and >= 0", ppo.entropy_coef());
  }
  if (!(ppo.max_grad_norm() >= 0 && std::isfinite(ppo.max_grad_norm()))) {
    p.Add("ppo.max_grad_norm", "must be finite and >= 0 (0 disables)",
          ppo.max_grad_norm());
  }
  if (!(ppo.target_kl() >= 0 && std::isfinite(ppo.target_kl()))) {
    p.Add("ppo.target_kl", "must be finite and >= 0 (0 disables)",
          ppo.target_kl());
  }
  const ExecutionConfig& execution = spec.execution();
  if (execution.precision() != "auto" && execution.precision() != "float32" &&
      execution.precision() != "bfloat16") {
    p.Add("execution.precision", "must be auto, float32 or bfloat16",
          absl::StrCat("\"", execution.precision(), "\""));
  }
  if (execution.cuda_graphs() != "auto" && execution.cuda_graphs() != "on" &&
      execution.cuda_graphs() != "off") {
    p.Add("execution.cuda_graphs", "must be auto, on or off",
          absl::StrCat("\"", execution.cuda_graphs(), "\""));
  } else if (execution.cuda_graphs() == "on") {
    // What the learner would refuse (learner/ppo_graphed_step.cc), said at
    // submit.
    const std::string why =
        !absl::StartsWith(spec.resources().learner_device(), "cuda")
            ? "the learner_device is not cuda"
        : spec.resources().num_learners() > 1
            ? "a gang's all-reduce runs inside each minibatch step"
        : HasRecurrentCore(spec.policy())
            ? "a recurrent update runs its sequences step by step"
        : execution.precision() == "bfloat16"
            ? "execution.precision is bfloat16"
        : execution.precision() == "auto" && IsCnnEncoder(spec.policy())
            ? "execution.precision auto takes bfloat16 for a CNN on recent "
              "GPUs "
              "(set it to float32)"
            : "";
    if (!why.empty()) {
      p.Add("execution.cuda_graphs",
            absl::StrCat("on captures one CUDA learner's minibatch step, "
                         "but ",
                         why, " (auto captures where it can)"),
            "\"on\"");
    }
  }
  if (execution.collective_backend() != "auto" &&
      execution.collective_backend() != "gloo" &&
      execution.collective_backend() != "nccl") {
    p.Add("execution.collective_backend", "must be auto, gloo or nccl",
          absl::StrCat("\"", execution.collective_backend(), "\""));
  } else if (execution.collective_backend() == "nccl" &&
             !absl::StartsWith(spec.resources().learner_device(), "cuda")) {
    p.Add("execution.collective_backend",
          "nccl all-reduces on CUDA devices, but the learner_device is not "
          "cuda (auto picks gloo there)",
          "\"nccl\"");
  }
  // A program's spec that still names the network under ppo.
  if (ppo.hidden_sizes_size() > 0) p.Add(MovedToPolicy("hidden_sizes"));
  if (ppo.shared_trunk()) p.Add(MovedToPolicy("shared_trunk"));
  if (ppo.initial_log_std() != 0) p.Add(MovedToPolicy("initial_log_std"));
  // ... or the execution settings.
  if (!ppo.cpu_kernels().empty()) p.Add(MovedToExecution("cpu_kernels"));
  if (!ppo.precision().empty()) p.Add(MovedToExecution("precision"));
  if (!ppo.cuda_graphs().empty()) p.Add(MovedToExecution("cuda_graphs"));
  for (std::string& problem : LeagueProblems(spec)) {
    p.Add(std::move(problem));
  }
  for (std::string& problem : NamedPolicyProblems(spec, ValidateRunSpec)) {
    p.Add(std::move(problem));
  }
  for (std::string& problem : PolicyProblems(spec)) {
    p.Add(std::move(problem));
  }

  const Resources& res = spec.resources();
  if (res.num_learners() < 1 || res.num_learners() > 1024) {
    p.Add("resources.num_learners", "must be in [1, 1024]", res.num_learners());
  }
  if (res.learner_per_policy() && spec.policies_size() < 2) {
    p.Add("resources.learner_per_policy",
          "needs a policies: block (two or more policies, each on a learner "
          "of its own)",
          absl::StrCat(spec.policies_size(), " policies"));
  }
  if (res.num_actors() < 1 || res.num_actors() > 65536) {
    p.Add("resources.num_actors", "must be in [1, 65536]", res.num_actors());
  }
  if (res.min_actors() < 1 || res.min_actors() > res.num_actors()) {
    p.Add("resources.min_actors", "must be in [1, resources.num_actors]",
          res.min_actors());
  }
  if (!IsKnownDevice(res.learner_device())) {
    p.Add("resources.learner_device", "must be cpu, cuda or cuda:N",
          JsonQuote(res.learner_device()));
  }
  if (!IsKnownDevice(res.actor_device())) {
    p.Add("resources.actor_device", "must be cpu, cuda or cuda:N",
          JsonQuote(res.actor_device()));
  }
  if (res.actor_threads() < 1 || res.actor_threads() > 1024) {
    p.Add("resources.actor_threads", "must be in [1, 1024]",
          res.actor_threads());
  }

  if (spec.max_policy_lag() < 0) {
    p.Add("max_policy_lag", "must be >= 0", spec.max_policy_lag());
  } else if (spec.sync_mode() == SYNC && spec.max_policy_lag() != 0) {
    p.Add("max_policy_lag", "must be 0 in SYNC mode (strictly on-policy)",
          spec.max_policy_lag());
  }
  if (spec.checkpoint_interval() < 0) {
    p.Add("checkpoint_interval", "must be >= 0", spec.checkpoint_interval());
  }
  if (spec.keep_checkpoints() < 1) {
    p.Add("keep_checkpoints", "must be >= 1", spec.keep_checkpoints());
  }
  if (spec.has_target_return() && !std::isfinite(spec.target_return())) {
    p.Add("target_return", "must be finite", spec.target_return());
  }
  return p.ToStatus();
}

absl::Status ResolveRunSpec(RunSpec* spec) {
  ApplyRunSpecDefaults(spec);
  RETURN_IF_ERROR(ValidateRunSpec(*spec));
  // The derived fields are the service's to fill (the run file's are
  // ignored, as common.proto says).
  EnvSpec* env = spec->mutable_env();
  // A plugin's spaces are the run file's to declare (the coordinator
  // cannot load it); actors check the plugin against them.
  if (!env->plugin().empty()) return ResolveEnvSpec(env);
  env->clear_observation_size();
  env->clear_num_discrete_actions();
  env->clear_continuous_action_size();
  env->clear_action_low();
  env->clear_action_high();
  env->clear_reward_low();
  env->clear_reward_high();
  return ResolveEnvSpec(env);
}

std::string GangCollectiveBackend(const RunSpec& spec) {
  const std::string& backend = spec.execution().collective_backend();
  if (backend == "gloo" || backend == "nccl") return backend;
  return absl::StartsWith(spec.resources().learner_device(), "cuda") ? "nccl"
                                                                     : "gloo";
}

int LearnerProcesses(const RunSpec& spec) {
  const int learners = std::max(1, spec.resources().num_learners());
  return spec.resources().learner_per_policy()
             ? learners * std::max(1, spec.policies_size())
             : learners;
}

LearnerRole LearnerRoleOf(const RunSpec& spec, int rank) {
  const int learners = std::max(1, spec.resources().num_learners());
  if (!spec.resources().learner_per_policy()) return {0, rank};
  return {rank / learners, rank % learners};
}

std::vector<int> PolicyLearnerRanks(const RunSpec& spec, int rank) {
  std::vector<int> ranks;
  if (!spec.resources().learner_per_policy()) return ranks;
  const int learners = std::max(1, spec.resources().num_learners());
  for (int k = 1; k < spec.policies_size(); ++k) {
    ranks.push_back(k * learners + rank);
  }
  return ranks;
}

int LearnerRankOfActor(int actor_id, int num_learners) {
  return actor_id % std::max(1, num_learners);
}

int ActorsOfLearnerRank(int rank, int num_learners, int num_actors) {
  num_learners = std::max(1, num_learners);
  return num_actors / num_learners + (rank < num_actors % num_learners ? 1 : 0);
}

absl::StatusOr<RunSpec> LoadRunSpec(absl::string_view text,
                                    RunFileFormat format) {
  ASSIGN_OR_RETURN(RunSpec spec, ParseRunSpec(text, format));
  RETURN_IF_ERROR(ResolveRunSpec(&spec));
  return spec;
}

absl::StatusOr<RunSpec> LoadRunSpecFile(const std::string& path) {
  // One byte past the limit is enough to tell a file over it (and a file
  // without end, such as /dev/zero, from one). The reason a file cannot be
  // read is the OS's, as the Python client words it too.
  auto unreadable = [&path](int error) {
    return absl::NotFoundError(absl::StrCat("cannot read run file ", path, ": ",
                                            std::strerror(error)));
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return unreadable(errno);
  std::string text(kMaxRunFileBytes + 1, '\0');
  size_t have = 0;
  while (have < text.size()) {
    const ssize_t n = ::read(fd, &text[have], text.size() - have);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      return unreadable(error);  // e.g. a directory
    }
    if (n == 0) break;
    have += static_cast<size_t>(n);
  }
  ::close(fd);
  text.resize(have);
  const RunFileFormat format = absl::EndsWith(path, ".json")
                                   ? RunFileFormat::kJson
                                   : RunFileFormat::kYaml;
  auto spec = LoadRunSpec(text, format);
  if (!spec.ok()) {
    return absl::Status(spec.status().code(),
                        absl::StrCat(path, ": ", spec.status().message()));
  }
  return spec;
}

}  // namespace rl
