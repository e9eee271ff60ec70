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

absl::Status AllowLeaving(const rl_env_plugin* plugin, rl_env* env,
                          const EnvSpec& spec, const std::string& origin) {
  if (!spec.agents_leave()) return absl::OkStatus();
  if (plugin->allow_leaving == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "environment plugin ", origin,
        " has no allow_leaving: its agents cannot leave early, but the run "
        "sets env.agents_leave (remove it, or see rl_env_plugin.h, \"Agents "
        "that leave early\")"));
  }
  char error[1024] = "";
  if (plugin->allow_leaving(env, error, sizeof(error)) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "environment plugin ", origin,
        ": allow_leaving failed: ", error[0] != '\0' ? error : "(no message)"));
  }
  return absl::OkStatus();
}

std::string CheckLeavingStep(const uint8_t* was_alive, const uint8_t* alive,
                             const float* rewards, const uint8_t* terminated,
                             const uint8_t* truncated, int64_t n, int per_env) {
  auto where = [&](int64_t i) {
    return absl::StrCat("row ", i, " (agent ", i % per_env, " of environment ",
                        i / per_env, ")");
  };
  for (int64_t first = 0; first < n; first += per_env) {
    bool every_alive_ended = true, any_alive = false;
    for (int64_t i = first; i < first + per_env; ++i) {
      if (alive[i] > 1) {
        return absl::StrCat(where(i), ": alive=", alive[i],
                            " (alive is 0 or 1)");
      }
      const bool ended = terminated[i] || truncated[i];
      if (!was_alive[i] && (ended || rewards[i] != 0.f)) {
        return absl::StrCat(where(i),
                            " left its game earlier, yet the step "
                            "gave it reward ",
                            rewards[i], ", terminated=", terminated[i],
                            ", truncated=", truncated[i],
                            " (a row that has left has reward and flags 0 "
                            "until its environment resets)");
      }
      if (was_alive[i] && !ended) every_alive_ended = false;
      any_alive = any_alive || alive[i];
    }
    if (!any_alive) {
      return absl::StrCat("environment ", first / per_env,
                          ": no agent is alive after the step (when its last "
                          "agents' episodes end it resets, every row alive)");
    }
    for (int64_t i = first; i < first + per_env; ++i) {
      const bool ended = terminated[i] || truncated[i];
      if (every_alive_ended) {
        if (!alive[i]) {
          return absl::StrCat(
              where(i),
              ": alive=0 after its environment's game ended (every "
              "agent still in it ended its episode): the environment resets, "
              "every row alive");
        }
      } else if (was_alive[i] && ended && alive[i]) {
        return absl::StrCat(
            where(i),
            " ended its episode and is still alive while others "
            "play on: it leaves (alive=0) until its environment resets");
      } else if (was_alive[i] && !ended && !alive[i]) {
        return absl::StrCat(where(i),
                            ": alive=0 without its episode ending "
                            "(an agent leaves at the step its episode ends)");
      } else if (!was_alive[i] && alive[i]) {
        return absl::StrCat(
            where(i),
            " is alive again while others of its environment play "
            "on (an environment resets as one, when its last agents' "
            "episodes end)");
      }
    }
  }
  return "";
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
