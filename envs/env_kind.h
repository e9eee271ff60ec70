// The environments this service implements, as an enum shared by the
// registry and the physics dispatch (env_batch.h, CUDA too).
#ifndef RL_ENVS_ENV_KIND_H_
#define RL_ENVS_ENV_KIND_H_

namespace rl {

enum class EnvKind : int {
  kCartPole,
  kAcrobot,
  kMountainCar,
  kPendulum,
  kMountainCarContinuous,
};

}  // namespace rl

#endif  // RL_ENVS_ENV_KIND_H_
