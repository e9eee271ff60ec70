// Gymnasium's MuJoCo model files (the pinned gymnasium wheel's
// envs/mujoco/assets/*.xml), compiled into the plugin so that it needs no
// file beside it (a BUILD genrule writes mujoco_assets.cc).
#ifndef RL_ENVS_MUJOCO_MUJOCO_ASSETS_H_
#define RL_ENVS_MUJOCO_MUJOCO_ASSETS_H_

namespace rl::mujoco_envs {

struct MujocoAsset {
  const char* name;  // "half_cheetah.xml"
  const char* text;  // the file's contents
};

// The asset named `name`, or null.
const MujocoAsset* FindMujocoAsset(const char* name);

}  // namespace rl::mujoco_envs

#endif  // RL_ENVS_MUJOCO_MUJOCO_ASSETS_H_
