// Bytes kept in checkpoints as uint8 tensors: serialized protos, random
// streams' states. Shared by the learner's training state and the league's.
#ifndef RL_POLICY_TENSOR_BYTES_H_
#define RL_POLICY_TENSOR_BYTES_H_

#include <torch/types.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace rl {

// Bytes as a [n] uint8 CPU tensor (a copy), and back.
torch::Tensor BytesTensor(const std::string& bytes);
std::string TensorBytes(const torch::Tensor& tensor);

// A torch generator's state as bytes, and back (INVALID_ARGUMENT naming
// `source` for bytes that are not a generator state).
std::string GeneratorStateBytes(torch::Generator& generator);
absl::Status SetGeneratorState(const std::string& bytes,
                               torch::Generator& generator,
                               absl::string_view source);

}  // namespace rl

#endif  // RL_POLICY_TENSOR_BYTES_H_
