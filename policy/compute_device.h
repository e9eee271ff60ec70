// The devices a learner, an actor or rl_local computes on, and the refusal
// of a run asking for one they cannot use. Today every one of them computes
// on the CPU (the CUDA learner and actor are issue 13): a run asking for
// `cuda` is refused with a clear error, never trained on the CPU instead.
#ifndef RL_POLICY_COMPUTE_DEVICE_H_
#define RL_POLICY_COMPUTE_DEVICE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace rl {

// CUDA devices LibTorch sees in this binary ("cuda:0", ...); empty without
// a GPU or when LibTorch's CUDA library is not linked in (the CPU build).
// Workers report them at registration.
std::vector<std::string> VisibleCudaDevices();

// OK for "cpu" (or empty). For "cuda" / "cuda:N": INVALID_ARGUMENT naming
// `field` when no such CUDA device is visible here, UNIMPLEMENTED when it
// is but `who` (e.g. "this learner") has no CUDA path yet.
absl::Status CheckComputeDevice(absl::string_view device,
                                absl::string_view field, absl::string_view who);

}  // namespace rl

#endif  // RL_POLICY_COMPUTE_DEVICE_H_
