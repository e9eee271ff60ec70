#include "policy/compute_device.h"

#include <torch/cuda.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace rl {

std::vector<std::string> VisibleCudaDevices() {
  std::vector<std::string> devices;
  // Without libtorch_cuda, LibTorch's CUDA hooks report no device.
  const int64_t count = static_cast<int64_t>(torch::cuda::device_count());
  for (int64_t i = 0; i < count; ++i) {
    devices.push_back(absl::StrCat("cuda:", i));
  }
  return devices;
}

absl::Status CheckComputeDevice(absl::string_view device,
                                absl::string_view field,
                                absl::string_view who) {
  if (device.empty() || device == "cpu") return absl::OkStatus();
  int index = 0;
  if (device != "cuda" &&
      !(absl::StartsWith(device, "cuda:") &&
        absl::SimpleAtoi(device.substr(5), &index) && index >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": must be cpu, cuda or cuda:N (got \"", device, "\")"));
  }
  const int visible = static_cast<int>(VisibleCudaDevices().size());
  if (index >= visible) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": \"", device, "\", but ", who, " sees ",
        visible == 0 ? std::string("no CUDA device")
                     : absl::StrCat(visible, " CUDA device(s)"),
        " (no GPU or driver here, or a binary built without LibTorch's CUDA "
        "library); it refuses rather than run on the CPU. Use cpu, or a "
        "worker with a GPU"));
  }
  return absl::UnimplementedError(absl::StrCat(
      field, ": \"", device, "\": ", who,
      " computes on the CPU only (the CUDA path is not built yet); it "
      "refuses rather than run on the CPU. Use cpu"));
}

}  // namespace rl
