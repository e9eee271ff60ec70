// LightCycles-v0's scripted player as a TorchScript module: a league
// member of another kind (docs/multi_agent.md#members-of-other-kinds).
//
// The rule of the environment's own scripted cycle
// (envs/games/light_cycles.cc, `opponent: scripted`), read from the
// player's observation (its window of the board, its heading up): straight
// while the cell ahead is free, else the side with more room (the free
// cells it can still reach), a coin between equals (torch's global
// generator). forward(obs [B, 2 * (2S-1)^2] float32) -> (actions [B]
// int64, values [B] zeros), as an exported policy's.
#ifndef RL_EXAMPLES_MULTI_AGENT_SCRIPTED_CYCLE_H_
#define RL_EXAMPLES_MULTI_AGENT_SCRIPTED_CYCLE_H_

#include <torch/script.h>

#include <string>

#include "absl/status/statusor.h"

namespace rl {

// The player for a board of side `size` (6 to 16, kwargs.size; else
// INVALID_ARGUMENT).
absl::StatusOr<torch::jit::Module> ScriptedCycle(int size);

// A player of uniform random moves (straight, left, right; torch's global
// generator), the environment's `opponent: random` as a league member:
// forward(obs [B, D]) -> (actions [B] int64, values [B] zeros).
absl::StatusOr<torch::jit::Module> RandomCycle();

}  // namespace rl

#endif  // RL_EXAMPLES_MULTI_AGENT_SCRIPTED_CYCLE_H_
