#include "policy/tensor_bytes.h"

#include <torch/torch.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "policy/torch_status.h"

namespace rl {

torch::Tensor BytesTensor(const std::string& bytes) {
  torch::Tensor t =
      torch::empty({static_cast<int64_t>(bytes.size())}, torch::kUInt8);
  if (!bytes.empty())
    std::memcpy(t.data_ptr<uint8_t>(), bytes.data(), bytes.size());
  return t;
}

std::string TensorBytes(const torch::Tensor& tensor) {
  const torch::Tensor t = tensor.contiguous();
  return std::string(reinterpret_cast<const char*>(t.data_ptr<uint8_t>()),
                     static_cast<size_t>(t.numel()));
}

std::string GeneratorStateBytes(torch::Generator& generator) {
  return TensorBytes(generator.get_state());
}

absl::Status SetGeneratorState(const std::string& bytes,
                               torch::Generator& generator,
                               absl::string_view source) {
  return CatchTorchErrors(
      absl::StrCat(source, ": the updater's generator state"),
      [&] { generator.set_state(BytesTensor(bytes)); },
      absl::StatusCode::kInvalidArgument);
}

}  // namespace rl
