// The devices a learner, an actor or rl_local computes on, and the refusal
// of a run asking for one they cannot use. Learners (and rl_local's
// updates) compute on CUDA where a device is visible
// (ResolveComputeDevice); actors have no CUDA path yet (CheckComputeDevice
// refuses it). A run asking for `cuda` where it cannot have it is refused
// with a clear error, never trained on the CPU instead.
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

// OK for "cpu" (or empty). For "cuda" / "cuda:N": INVALID_ARGUMENT naming
// `field` when no such CUDA device is visible here, UNIMPLEMENTED when it
// is but `who` (e.g. "this learner") has no CUDA path yet.
absl::Status CheckComputeDevice(absl::string_view device,
                                absl::string_view field, absl::string_view who);

// For a caller with a CUDA path: "cpu" (or empty) is the CPU, "cuda" the
// first CUDA device, "cuda:N" that one; INVALID_ARGUMENT naming `field`
// for a malformed device or one not visible here (with the reason CUDA
// did not load, where it did not).
absl::StatusOr<c10::Device> ResolveComputeDevice(absl::string_view device,
                                                 absl::string_view field,
                                                 absl::string_view who);

}  // namespace rl

#endif  // RL_POLICY_COMPUTE_DEVICE_H_
