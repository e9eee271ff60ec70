#include "testing/run_specs.h"

#include <filesystem>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runspec/run_spec.h"
#include "yaml-cpp/yaml.h"

namespace rl {
namespace {

constexpr char kSmallRun[] = R"(
name: small
env: {id: CartPole-v1}
envs_per_actor: 4
segment_length: 16
total_env_steps: 640
seed: 1
ppo: {num_epochs: 2, num_minibatches: 2}
policy: {hidden_sizes: [32]}
resources: {num_actors: 1}
)";

// Merges `over` into `base`, maps recursively, anything else replaced.
void Merge(YAML::Node base, const YAML::Node& over) {
  for (const auto& kv : over) {
    const std::string key = kv.first.as<std::string>();
    if (kv.second.IsMap() && base[key] && base[key].IsMap()) {
      Merge(base[key], kv.second);
    } else {
      base[key] = kv.second;
    }
  }
}

}  // namespace

RunSpec SmallRunSpec(absl::string_view yaml_overrides) {
  YAML::Node run = YAML::Load(kSmallRun);
  if (!yaml_overrides.empty()) {
    Merge(run, YAML::Load(std::string(yaml_overrides)));
  }
  YAML::Emitter out;
  out << YAML::Flow << run;
  absl::StatusOr<RunSpec> spec = LoadRunSpec(out.c_str(), RunFileFormat::kYaml);
  if (!spec.ok()) {
    ADD_FAILURE() << "SmallRunSpec(\"" << yaml_overrides
                  << "\"): " << spec.status();
    return RunSpec();
  }
  return *spec;
}

std::string WalkersEnvYaml(int max_episode_steps) {
  const std::string plugin =
      std::filesystem::absolute("examples/multi_agent/libwalkers.so").string();
  return absl::StrCat(
      R"(env:
  id: Walkers-v0
  plugin: )",
      plugin, R"(
  kwargs: {agents: 3, length: 8}
  agents_per_env: 3
  agents_leave: true
  observation_size: 8
  num_discrete_actions: 2
  reward_low: -1
  reward_high: 1
)",
      max_episode_steps > 0
          ? absl::StrCat("  max_episode_steps: ", max_episode_steps, "\n")
          : "");
}

RunSpec LightCyclesLeagueRunSpec(absl::string_view league, int rows) {
  absl::StatusOr<RunSpec> spec = LoadRunSpec(absl::StrCat(R"(
env:
  id: LightCycles-v0
  plugin: light_cycles
  kwargs: {size: 6, opponent: self}
  agents_per_env: 2
  observation_size: 242
  num_discrete_actions: 3
  reward_low: -1
  reward_high: 1
envs_per_actor: )",
                                                          rows, R"(
segment_length: 16
total_env_steps: 100000
seed: 5
policy: {hidden_sizes: [16]}
ppo: {num_minibatches: 2, num_epochs: 1}
league: )",
                                                          league),
                                             RunFileFormat::kYaml);
  if (!spec.ok()) {
    ADD_FAILURE() << "LightCyclesLeagueRunSpec(\"" << league
                  << "\"): " << spec.status();
    return RunSpec();
  }
  return *spec;
}

}  // namespace rl
