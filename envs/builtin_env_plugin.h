// The five built-in classic-control environments as a plugin table
// (envs/plugin_api/rl_env_plugin.h): the service opens them through the
// same ABI, checks and code path as a user's shared library.
#ifndef RL_ENVS_BUILTIN_ENV_PLUGIN_H_
#define RL_ENVS_BUILTIN_ENV_PLUGIN_H_

#include "envs/plugin_api/rl_env_plugin.h"

namespace rl {

// Serves every id of RegisteredEnvIds(); kwargs must be empty.
const rl_env_plugin* BuiltinEnvPlugin();

}  // namespace rl

#endif  // RL_ENVS_BUILTIN_ENV_PLUGIN_H_
