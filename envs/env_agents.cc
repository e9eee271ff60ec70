#include "envs/env_agents.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace rl {

absl::StatusOr<EnvAgents> ReadEnvAgents(const rl_env_plugin* plugin,
                                        rl_env* env,
                                        const std::string& origin) {
  EnvAgents out;
  out.names = {"0"};
  if (plugin->agents == nullptr) return out;
  auto failed = [&](const std::string& why) {
    return absl::FailedPreconditionError(
        absl::StrCat("environment plugin ", origin, ": its agents: ", why));
  };
  rl_env_agents agents{};
  char error[1024] = "";
  if (plugin->agents(env, &agents, error, sizeof(error)) != 0) {
    return failed(absl::StrCat("agents failed: ",
                               error[0] != '\0' ? error : "(no message)"));
  }
  if (agents.agents_per_env < 1 || agents.agents_per_env > kMaxAgentsPerEnv) {
    return failed(absl::StrCat(agents.agents_per_env, " per environment (1 to ",
                               kMaxAgentsPerEnv, ")"));
  }
  out.per_env = agents.agents_per_env;
  out.names.clear();
  std::set<std::string> seen;
  for (int k = 0; k < out.per_env; ++k) {
    if (agents.agent_names == nullptr) {
      out.names.push_back(absl::StrCat(k));
      continue;
    }
    const char* name = agents.agent_names[k];
    const std::string text = name != nullptr ? name : "";
    if (text.empty() || text.size() > 64) {
      return failed(absl::StrCat("agent ", k,
                                 ": a name of 1 to 64 characters (got \"",
                                 text.substr(0, 64), "\")"));
    }
    if (!seen.insert(text).second) {
      return failed(absl::StrCat("agent ", k, ": the name \"", text,
                                 "\" is taken by an earlier agent"));
    }
    out.names.push_back(text);
  }
  return out;
}

absl::Status CheckEnvAgents(const EnvAgents& agents, const EnvSpec& spec,
                            const std::string& origin) {
  if (agents.per_env == AgentsPerEnv(spec)) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "environment plugin ", origin, " declares ", DescribeAgents(agents),
      "; the run's env.agents_per_env is ", AgentsPerEnv(spec),
      agents.per_env > 1
          ? absl::StrCat(" (declare env.agents_per_env: ", agents.per_env,
                         ": envs_per_actor then counts rows, ", agents.per_env,
                         " per environment)")
          : ""));
}

std::string DescribeAgents(const EnvAgents& agents) {
  std::string out =
      absl::StrCat(agents.per_env, " agent", agents.per_env == 1 ? "" : "s",
                   " per environment");
  if (agents.per_env > 1) {
    absl::StrAppend(&out, " (", absl::StrJoin(agents.names, ", "), ")");
  }
  return out;
}

int WholeCopies(int num_envs, const EnvSpec& spec) {
  const int a = AgentsPerEnv(spec);
  return (std::max(num_envs, 1) + a - 1) / a * a;
}

}  // namespace rl
