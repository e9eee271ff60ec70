#include "runspec/named_policies.h"

#include <algorithm>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/json_quote.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "runspec/field_problems.h"
#include "runspec/policy_rules.h"

namespace rl {
namespace {

// The problems of an INVALID_ARGUMENT of FieldProblems, one by one.
std::vector<std::string> Problems(const absl::Status& status) {
  if (status.ok()) return {};
  return absl::StrSplit(status.message(), "; ");
}

}  // namespace

RunSpec NamedPolicyRun(const RunSpec& run, int index) {
  const NamedPolicy& named = run.policies(index);
  RunSpec own = run;
  own.clear_policies();
  own.clear_league();
  if (named.policy().hidden_sizes_size() > 0) {
    own.mutable_policy()->clear_hidden_sizes();
  }
  own.mutable_policy()->MergeFrom(named.policy());
  own.mutable_ppo()->MergeFrom(named.ppo());
  ApplyPolicyDefaults(own.env(), own.ppo(), own.mutable_policy());
  return own;
}

std::string PolicySettingField(const RunSpec& run, const std::string& path) {
  const std::vector<std::string> parts = absl::StrSplit(path, '.');
  if (parts.size() < 2 || (parts[0] != "ppo" && parts[0] != "policy")) {
    return "";
  }
  for (int i = 0; i < run.policies_size(); ++i) {
    const google::protobuf::Message* message = &run.policies(i);
    for (size_t k = 0; k < parts.size() && message != nullptr; ++k) {
      const google::protobuf::FieldDescriptor* field =
          message->GetDescriptor()->FindFieldByName(parts[k]);
      if (field == nullptr) break;  // a field named otherwise: not set here
      const google::protobuf::Reflection* reflection = message->GetReflection();
      const bool set = field->is_repeated()
                           ? reflection->FieldSize(*message, field) > 0
                           : reflection->HasField(*message, field);
      if (!set) break;
      if (k + 1 == parts.size()) {
        return absl::StrCat("policies[", i, "] (", run.policies(i).name(), ")");
      }
      message = field->message_type() == nullptr
                    ? nullptr
                    : &reflection->GetMessage(*message, field);
    }
  }
  return "";
}

absl::Status CheckPolicyDefaultsGiven(const std::string& json,
                                      const RunSpec& run) {
  google::protobuf::Struct root;
  if (!google::protobuf::util::JsonStringToMessage(json, &root).ok()) {
    return absl::OkStatus();
  }
  const auto policies = root.fields().find("policies");
  if (policies == root.fields().end() || !policies->second.has_list_value()) {
    return absl::OkStatus();
  }
  const auto is_default = [](const google::protobuf::Value& v) {
    return (v.has_bool_value() && !v.bool_value()) ||
           (v.has_number_value() && v.number_value() == 0) ||
           (v.has_string_value() &&
            (v.string_value().empty() || v.string_value() == "0")) ||
           (v.has_list_value() && v.list_value().values_size() == 0);
  };
  FieldProblems problems;
  const google::protobuf::ListValue& list = policies->second.list_value();
  for (int i = 0; i < list.values_size(); ++i) {
    if (!list.values(i).has_struct_value()) continue;
    const auto& fields = list.values(i).struct_value().fields();
    for (const auto& [block, runs] :
         {std::make_pair(
              "ppo", static_cast<const google::protobuf::Message*>(&run.ppo())),
          std::make_pair(
              "policy",
              static_cast<const google::protobuf::Message*>(&run.policy()))}) {
      const google::protobuf::Descriptor* type = runs->GetDescriptor();
      const auto given = fields.find(block);
      if (given == fields.end() || !given->second.has_struct_value()) continue;
      for (const auto& [key, value] : given->second.struct_value().fields()) {
        const google::protobuf::FieldDescriptor* field =
            type->FindFieldByName(key);
        if (field == nullptr) field = type->FindFieldByCamelcaseName(key);
        if (field == nullptr || field->has_presence() || !is_default(value)) {
          continue;
        }
        // The run's at its default too: the policy's value is what it gets.
        const google::protobuf::Reflection* reflection = runs->GetReflection();
        if (field->is_repeated() ? reflection->FieldSize(*runs, field) == 0
                                 : !reflection->HasField(*runs, field)) {
          continue;
        }
        problems.Add(absl::StrCat(
            "policies[", i, "].", block, ".", field->name(),
            ": the field's default, which a policy cannot put over the run's "
            "(a policy takes the fields it gives other values: it would "
            "train with the run's ",
            block, ".", field->name(), "); leave it out"));
      }
    }
  }
  return problems.ToStatus();
}

std::vector<int> PolicyOfAgent(const RunSpec& run) {
  if (run.policies_size() == 0) return {};
  std::vector<int> out(std::max(1, run.env().agents_per_env()), -1);
  for (int i = 0; i < run.policies_size(); ++i) {
    for (const int agent : run.policies(i).agents()) {
      if (agent >= 0 && agent < static_cast<int>(out.size())) out[agent] = i;
    }
  }
  return out;
}

std::vector<int64_t> RowsOfPolicy(const RunSpec& run, int index, int64_t rows) {
  const std::vector<int> owner = PolicyOfAgent(run);
  std::vector<int64_t> out;
  if (owner.empty()) return out;
  for (int64_t r = 0; r < rows; ++r) {
    if (owner[r % static_cast<int64_t>(owner.size())] == index) {
      out.push_back(r);
    }
  }
  return out;
}

std::vector<PolicyEpisodes> EpisodesByPolicy(
    const RunSpec& run, const std::vector<int64_t>& rows,
    const std::vector<float>& returns, const std::vector<int32_t>& lengths) {
  if (run.policies_size() == 0) return {PolicyEpisodes{returns, lengths}};
  const std::vector<int> owner = PolicyOfAgent(run);
  std::vector<PolicyEpisodes> out(run.policies_size());
  const size_t n = std::min({rows.size(), returns.size(), lengths.size()});
  for (size_t k = 0; k < n; ++k) {
    PolicyEpisodes& p =
        out[owner[rows[k] % static_cast<int64_t>(owner.size())]];
    p.returns.push_back(returns[k]);
    p.lengths.push_back(lengths[k]);
  }
  return out;
}

std::string PolicyCheckpointRoot(const std::string& run_dir,
                                 const std::string& name) {
  return absl::StrCat(run_dir, "/policies/", name, "/checkpoints");
}

RunSpec PolicyRun(const RunSpec& run, int index) {
  return run.policies_size() > 0 ? NamedPolicyRun(run, index) : run;
}

std::vector<std::string> NamedPolicyProblems(
    const RunSpec& run,
    const std::function<absl::Status(const RunSpec&)>& validate) {
  std::vector<std::string> out;
  if (run.policies_size() == 0) return out;
  const int agents = run.env().agents_per_env();
  if (run.policies_size() < 2) {
    out.push_back(FieldProblem(
        "policies",
        "name two or more (one policy for every agent is the run's own "
        "policy and ppo: leave policies out)",
        run.policies_size()));
  }
  if (agents < 2) {
    out.push_back(FieldProblem("policies",
                               "needs an environment of several agents "
                               "(env.agents_per_env >= 2)",
                               absl::StrCat("env.agents_per_env ", agents)));
    return out;
  }
  if (run.has_league()) {
    out.push_back(
        "league: not with several policies in this version (a league "
        "trains one policy against its own past versions)");
  }
  if (run.policy().central_value()) {
    out.push_back(FieldProblem("policy.central_value",
                               "not with several policies in this version",
                               "true"));
  }
  RunSpec base = run;
  base.clear_policies();
  base.clear_league();
  PolicyConfig run_core = run.policy();
  ApplyPolicyDefaults(run.env(), run.ppo(), &run_core);
  const std::vector<std::string> base_problems = Problems(validate(base));
  std::set<std::string> names;
  std::vector<int> owner(agents, -1);
  for (int i = 0; i < run.policies_size(); ++i) {
    const NamedPolicy& p = run.policies(i);
    const std::string path = absl::StrCat("policies[", i, "]");
    if (!IsPolicyName(p.name())) {
      out.push_back(FieldProblem(path + ".name",
                                 "1-32 characters of a-z, 0-9, _ and -",
                                 JsonQuote(p.name())));
    } else if (!names.insert(p.name()).second) {
      out.push_back(FieldProblem(path + ".name", "already names another policy",
                                 JsonQuote(p.name())));
    }
    if (p.agents_size() == 0) {
      out.push_back(FieldProblem(path + ".agents",
                                 "list the agent indices it plays", "none"));
    }
    for (const int agent : p.agents()) {
      if (agent < 0 || agent >= agents) {
        out.push_back(
            FieldProblem(path + ".agents",
                         absl::StrCat("agent indices are 0 to ", agents - 1,
                                      " (env.agents_per_env ", agents, ")"),
                         agent));
      } else if (owner[agent] >= 0) {
        out.push_back(FieldProblem(
            path + ".agents",
            absl::StrCat("agent ", agent, " is already played by policies[",
                         owner[agent], "]"),
            agent));
      } else {
        owner[agent] = i;
      }
    }
    const RunSpec own = NamedPolicyRun(run, i);
    if (own.policy().central_value() && !run.policy().central_value()) {
      out.push_back(FieldProblem(path + ".policy.central_value",
                                 "not with several policies in this version",
                                 "true"));
    }
    // One recurrent state per row, the run's: every policy carries the
    // run's core (or none with it).
    if (own.policy().core() != run_core.core() ||
        RecurrentStateSize(own.policy()) != RecurrentStateSize(run_core)) {
      out.push_back(FieldProblem(
          path + ".policy.core",
          absl::StrCat("every policy carries the run's recurrent core in this "
                       "version (policy.core ",
                       JsonQuote(run_core.core()), ", core_size ",
                       run_core.core_size(),
                       "): set core and core_size on the run's policy"),
          absl::StrCat(JsonQuote(own.policy().core()), ", core_size ",
                       own.policy().core_size())));
    }
    // Its update learns from whole sequences of its own agents' rows.
    const int64_t own_rows =
        static_cast<int64_t>(run.envs_per_actor()) / agents * p.agents_size();
    const int own_minibatches = own.ppo().num_minibatches();
    if (HasRecurrentCore(own.policy()) && p.agents_size() > 0 &&
        own_minibatches >= 1 && own_rows % own_minibatches != 0) {
      out.push_back(FieldProblem(
          path + ".ppo.num_minibatches",
          absl::StrCat("a recurrent policy learns from whole env sequences: "
                       "num_minibatches must divide the ",
                       own_rows,
                       " rows its agents play in an actor's batch "
                       "(envs_per_actor / env.agents_per_env x its agents)"),
          own_minibatches));
    }
    // Its own problems: those of its run that the run's own check does
    // not already report, named under policies[i] (its run's rule of
    // whole env sequences counts envs_per_actor, not its rows: above).
    for (const std::string& problem : Problems(validate(own))) {
      if (std::find(base_problems.begin(), base_problems.end(), problem) !=
              base_problems.end() ||
          absl::StartsWith(problem, kWholeSequencesProblem)) {
        continue;
      }
      out.push_back(absl::StartsWith(problem, "ppo.") ||
                            absl::StartsWith(problem, "policy.")
                        ? absl::StrCat(path, ".", problem)
                        : absl::StrCat(path, " (", p.name(), "): ", problem));
    }
    // The rewards are scaled once, for every row, with the run's gamma.
    if (p.ppo().normalize_rewards() && !run.ppo().normalize_rewards()) {
      out.push_back(
          FieldProblem(path + ".ppo.normalize_rewards",
                       "the rewards are scaled once for every row: set "
                       "ppo.normalize_rewards on the run",
                       "true"));
    }
    if (run.ppo().normalize_rewards() &&
        own.ppo().gamma() != run.ppo().gamma()) {
      out.push_back(FieldProblem(
          path + ".ppo.gamma",
          absl::StrCat("must be the run's ppo.gamma (", run.ppo().gamma(),
                       ") with ppo.normalize_rewards: the rewards are scaled "
                       "once, with it"),
          own.ppo().gamma()));
    }
    // Its update learns from its own agents' rows.
    const int64_t rows = own_rows * run.segment_length();
    if (p.agents_size() > 0 && own.ppo().num_minibatches() > rows) {
      out.push_back(
          FieldProblem(path + ".ppo.num_minibatches",
                       absl::StrCat("more than the ", rows,
                                    " steps its agents take in a segment"),
                       own.ppo().num_minibatches()));
    }
  }
  std::vector<int> unplayed;
  for (int a = 0; a < agents; ++a) {
    if (owner[a] < 0) unplayed.push_back(a);
  }
  if (!unplayed.empty()) {
    out.push_back(FieldProblem("policies",
                               "every agent must be played by a policy; not "
                               "played: agents " +
                                   absl::StrJoin(unplayed, ", "),
                               absl::StrCat(agents, " agents")));
  }
  return out;
}

}  // namespace rl
