/* A plugin built for an ABI version this service does not load. */
#include <stddef.h>

#include "rl_env_plugin.h"

static rl_env_plugin table = {RL_ENV_ABI_VERSION + 41, sizeof(rl_env_plugin),
                              "from the future"};

const rl_env_plugin* rl_env_plugin_v1(void) { return &table; }
