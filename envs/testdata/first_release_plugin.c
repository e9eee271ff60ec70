/* A plugin built against the ABI's first release, before the optional
   space_parts: its function table ends at restore_state (struct_size says
   so; the slot after it holds a function that fails, which a loader
   reading beyond struct_size would call). One float observation, always
   0; Discrete(2) actions; every step terminates with reward 1. It must
   load and step unchanged. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rl_env_plugin.h"

typedef struct {
  int32_t n;
} batch;

static rl_env* create(const rl_env_options* o, rl_env_info* info, char* error,
                      size_t error_size) {
  (void)error;
  (void)error_size;
  batch* b = (batch*)malloc(sizeof(batch));
  b->n = o->num_envs;
  info->observation.kind = RL_SPACE_BOX;
  info->observation.dtype = RL_DTYPE_FLOAT32;
  info->observation.rank = 1;
  info->observation.shape[0] = 1;
  info->action.kind = RL_SPACE_DISCRETE;
  info->action.dtype = RL_DTYPE_INT64;
  info->action.rank = 1;
  info->action.shape[0] = 2;
  info->reward_low = 0;
  info->reward_high = 1;
  return (rl_env*)b;
}

static void destroy(rl_env* env) { free(env); }

static int reset(rl_env* env, const rl_env_buffers* out, char* error,
                 size_t error_size) {
  (void)error;
  (void)error_size;
  memset(out->observations, 0, sizeof(float) * ((batch*)env)->n);
  return 0;
}

static int step(rl_env* env, const void* actions, const rl_env_buffers* out,
                char* error, size_t error_size) {
  (void)actions;
  const int32_t n = ((batch*)env)->n;
  reset(env, out, error, error_size);
  for (int32_t i = 0; i < n; ++i) {
    out->rewards[i] = 1;
    out->terminated[i] = 1;
    out->truncated[i] = 0;
    if (out->episode_returns != NULL) out->episode_returns[i] = 1;
    if (out->episode_lengths != NULL) out->episode_lengths[i] = 1;
  }
  return 0;
}

/* Where a later table has space_parts: a loader that read beyond
   struct_size would call this, and the batch would fail to open. */
static int beyond_the_table(rl_env* env, rl_env_parts* parts, char* error,
                            size_t error_size) {
  (void)env;
  (void)parts;
  snprintf(error, error_size, "read beyond the table's struct_size");
  return 1;
}

static rl_env_plugin table = {RL_ENV_ABI_VERSION,
                              offsetof(rl_env_plugin, space_parts),
                              "first release",
                              create,
                              destroy,
                              reset,
                              step,
                              NULL,
                              NULL,
                              beyond_the_table};

const rl_env_plugin* rl_env_plugin_v1(void) { return &table; }
