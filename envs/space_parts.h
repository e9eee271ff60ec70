// Spaces as the plugin ABI declares them (envs/plugin_api/rl_env_plugin.h),
// described for messages, and Dict and Tuple spaces: the named parts a
// plugin's flat observation and action are made of, checked against the
// flat spaces it declares and against the run's env.observation_parts.
#ifndef RL_ENVS_SPACE_PARTS_H_
#define RL_ENVS_SPACE_PARTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "envs/plugin_api/rl_env_plugin.h"
#include "proto/common.pb.h"

namespace rl {

// "Box(float32, [3, 4])", "Discrete(2)": a space as error messages show it.
std::string DescribeSpace(const rl_space& space);

// Elements of one value of `space` as an array (a Discrete value is one).
int64_t SpaceElements(const rl_space& space);

// Elements a part takes in a flat observation, as gymnasium.spaces.flatten
// lays it out: a Box's elements, n for a Discrete(n) (a one-hot), sum(nvec)
// for a MultiDiscrete, a MultiBinary's elements.
int64_t FlatElements(const rl_space& space);

// One part of a Dict or Tuple space, where it lies in the flat vector.
struct SpacePart {
  std::string name;
  std::string space;  // DescribeSpace
  int64_t offset = 0;
  int64_t size = 0;  // in the flat observation, or entries of the action
  std::vector<int64_t> flat_shape;  // as env.observation_parts declares it
  bool bytes = false;               // a uint8 Box
};

struct EnvSpaceParts {
  std::vector<SpacePart> observation;  // empty: not a Dict or Tuple
  std::vector<SpacePart> action;
};

// The parts `plugin`'s batch `env` declares (none where its table has no
// space_parts), checked: each part a valid space of the ABI, names unique,
// the observation parts flattening to exactly info.observation (its
// elements, and uint8 only when every part is a uint8 Box), the action parts
// to info.action (one MultiDiscrete of their entries, or one float32 Box of
// their elements and bounds). FAILED_PRECONDITION naming the part.
absl::StatusOr<EnvSpaceParts> ReadSpaceParts(const rl_env_plugin* plugin,
                                             rl_env* env,
                                             const rl_env_info& info,
                                             const std::string& origin);

// OK if the plugin's observation parts are the run's
// env.observation_parts (names, flat shapes and dtypes, in order); a run
// without parts takes any observation whole. FAILED_PRECONDITION naming
// both sides otherwise.
absl::Status CheckObservationParts(const EnvSpaceParts& parts,
                                   const EnvSpec& spec,
                                   const std::string& origin);

// "image Box(uint8, [8, 8, 1]) at [0, 64), flip Discrete(2) at [64, 66)":
// a layout for logs and check-env.
std::string DescribeLayout(const std::vector<SpacePart>& parts);

}  // namespace rl

#endif  // RL_ENVS_SPACE_PARTS_H_
