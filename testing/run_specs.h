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

}  // namespace rl

#endif  // RL_TESTING_RUN_SPECS_H_
