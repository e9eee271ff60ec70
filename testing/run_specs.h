// Small valid run specs for tests: resolved (defaults applied, validated,
// environment filled from the registry) exactly as the coordinator and
// rl_local resolve run files.
#ifndef RL_TESTING_RUN_SPECS_H_
#define RL_TESTING_RUN_SPECS_H_

#include <string>

#include "absl/strings/string_view.h"
#include "proto/common.pb.h"

namespace rl {

// A tiny CartPole-v1 run (4 envs x 16 steps, 2 x 2 minibatches of 32,
// 32-unit network, 640 steps, SYNC, one actor) with `yaml_overrides`
// (run-file YAML, e.g. "env: {id: Pendulum-v1}\nsegment_length: 8") applied
// on top. Fails the running test (and returns the defaults) if the result
// does not load.
RunSpec SmallRunSpec(absl::string_view yaml_overrides = "");

// The `env:` block of a run file for Walkers-v0
// (examples/multi_agent/walkers.cc): 3 walkers an environment on a path of
// 8, each leaving its game at the goal (+1) or off the cliff (-1)
// (env.agents_leave), with `max_episode_steps` where it is > 0. The plugin
// is named by its absolute path from the test's working directory, so the
// test lists //examples/multi_agent:libwalkers.so in its data.
std::string WalkersEnvYaml(int max_episode_steps = 0);

// LightCycles-v0 by self-play on a 6x6 board (2 agents a copy, `rows`
// rows), a 16-unit network, with `league` (run-file YAML) as its league
// block. The test lists //envs/games:liblight_cycles.so in its data. Fails
// the running test (and returns the defaults) if it does not load.
RunSpec LightCyclesLeagueRunSpec(absl::string_view league, int rows = 8);

}  // namespace rl

#endif  // RL_TESTING_RUN_SPECS_H_
