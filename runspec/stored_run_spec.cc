// Specs stored by older coordinators, brought up to date when read back:
// fields that moved out of ppo: (to policy: and execution:) moved, and the
// env fields the service derives filled in.
#include "absl/status/status.h"
#include "envs/env_registry.h"
#include "proto/common.pb.h"
#include "runspec/run_spec.h"

namespace rl {
namespace {

// A run stored before the network moved from ppo: to policy: keeps its
// network (ppo.hidden_sizes, shared_trunk, initial_log_std, now read as
// policy's); run files and submitted specs that name them are refused.
void MoveLegacyPolicyFields(RunSpec* spec) {
  PPOConfig* ppo = spec->mutable_ppo();
  PolicyConfig* policy = spec->mutable_policy();
  if (ppo->hidden_sizes_size() > 0 && policy->hidden_sizes_size() == 0) {
    *policy->mutable_hidden_sizes() = ppo->hidden_sizes();
  }
  if (ppo->shared_trunk()) policy->set_shared_trunk(true);
  if (ppo->initial_log_std() != 0 && policy->initial_log_std() == 0) {
    policy->set_initial_log_std(ppo->initial_log_std());
  }
  if (policy->activation().empty()) policy->set_activation("tanh");
  ppo->clear_hidden_sizes();
  ppo->clear_shared_trunk();
  ppo->clear_initial_log_std();
}

// A run stored before the execution settings moved from ppo: to
// execution: keeps them (ppo.cpu_kernels, precision, cuda_graphs, now read
// as execution's).
void MoveLegacyExecutionFields(RunSpec* spec) {
  PPOConfig* ppo = spec->mutable_ppo();
  ExecutionConfig* execution = spec->mutable_execution();
  if (execution->cpu_kernels().empty()) {
    execution->set_cpu_kernels(ppo->cpu_kernels());
  }
  if (execution->precision().empty()) {
    execution->set_precision(ppo->precision());
  }
  if (execution->cuda_graphs().empty()) {
    execution->set_cuda_graphs(ppo->cuda_graphs());
  }
  ppo->clear_cpu_kernels();
  ppo->clear_precision();
  ppo->clear_cuda_graphs();
}

}  // namespace

void CompleteStoredRunSpec(RunSpec* spec) {
  MoveLegacyPolicyFields(spec);
  MoveLegacyExecutionFields(spec);
  EnvSpec env = spec->env();
  if (ResolveEnvSpec(&env).ok()) *spec->mutable_env() = env;
}

}  // namespace rl
