#include "policy/compute_device.h"

#include <torch/cuda.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "policy/cuda_runtime.h"

namespace rl {
namespace {

// Parses "cuda" / "cuda:N" into N; false for anything else.
bool ParseCuda(absl::string_view device, int* index) {
  *index = 0;
  return device == "cuda" ||
         (absl::StartsWith(device, "cuda:") &&
          absl::SimpleAtoi(device.substr(5), index) && *index >= 0);
}

absl::Status NotVisible(absl::string_view device, absl::string_view field,
                        absl::string_view who, int visible) {
  const absl::Status runtime = LoadCudaRuntime();
  return absl::InvalidArgumentError(absl::StrCat(
      field, ": \"", device, "\", but ", who, " sees ",
      visible == 0 ? std::string("no CUDA device")
                   : absl::StrCat(visible, " CUDA device(s)"),
      runtime.ok() ? std::string() : absl::StrCat(" (", runtime.message(), ")"),
      "; it refuses rather than run on the CPU. Use cpu, or a worker with "
      "a GPU"));
}

}  // namespace

std::vector<std::string> VisibleCudaDevices() {
  std::vector<std::string> devices;
  // Without libtorch_cuda loaded, LibTorch's CUDA hooks report no device.
  if (!LoadCudaRuntime().ok()) return devices;
  const int64_t count = static_cast<int64_t>(torch::cuda::device_count());
  for (int64_t i = 0; i < count; ++i) {
    devices.push_back(absl::StrCat("cuda:", i));
  }
  return devices;
}

absl::StatusOr<bool> UseBfloat16(absl::string_view precision,
                                 c10::Device device, bool convolutional) {
  if (precision == "bfloat16") return true;
  if (precision == "float32") return false;
  if (!precision.empty() && precision != "auto") {
    return absl::InvalidArgumentError(absl::StrCat(
        "execution.precision: must be auto, float32 or bfloat16 (got \"",
        precision, "\")"));
  }
  if (!device.is_cuda() || !convolutional) return false;
  const absl::StatusOr<int> major =
      CudaComputeCapabilityMajor(device.has_index() ? device.index() : 0);
  return major.ok() && *major >= 8;
}

absl::StatusOr<c10::Device> ResolveComputeDevice(absl::string_view device,
                                                 absl::string_view field,
                                                 absl::string_view who) {
  if (device.empty() || device == "cpu") return c10::Device(c10::kCPU);
  int index = 0;
  if (!ParseCuda(device, &index)) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": must be cpu, cuda or cuda:N (got \"", device, "\")"));
  }
  const int visible = static_cast<int>(VisibleCudaDevices().size());
  if (index >= visible) return NotVisible(device, field, who, visible);
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index));
}

}  // namespace rl
