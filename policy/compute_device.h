// The devices a learner, an actor or rl_local computes on, and the refusal
// of a run asking for one they cannot use. Learners, actors' inference and
// rl_local compute on CUDA where a device is visible; a run asking for
// `cuda` where there is none is refused with a clear error, never trained
// on the CPU instead.
#ifndef RL_POLICY_COMPUTE_DEVICE_H_
#define RL_POLICY_COMPUTE_DEVICE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "c10/core/Device.h"

namespace rl {

// CUDA devices LibTorch sees in this process ("cuda:0", ...), after
// loading its CUDA library (policy/cuda_runtime.h); empty without a GPU, a
// driver or the GPU runtime. Workers report them at registration.
std::vector<std::string> VisibleCudaDevices();

// "cpu" (or empty) is the CPU, "cuda" the
// first CUDA device, "cuda:N" that one; INVALID_ARGUMENT naming `field`
// for a malformed device or one not visible here (with the reason CUDA
// did not load, where it did not).
// Whether updates on `device` run in bfloat16 autocast for `precision`
// (PPOConfig.precision): "bfloat16" yes, "float32" no, "auto" (or empty)
// for a convolutional network on a CUDA device of compute capability 8 or
// newer (Ampere, Hopper). Measured on an H100 (tools/gpu_bundle_check.sh,
// device_bench): bfloat16 made a Nature CNN's update 1.16x as fast at 256
// envs, and an MLP's 0.79x to 0.86x (its casts cost more than they save).
// INVALID_ARGUMENT for another value.
absl::StatusOr<bool> UseBfloat16(absl::string_view precision,
                                 c10::Device device, bool convolutional);

absl::StatusOr<c10::Device> ResolveComputeDevice(absl::string_view device,
                                                 absl::string_view field,
                                                 absl::string_view who);

}  // namespace rl

#endif  // RL_POLICY_COMPUTE_DEVICE_H_
