// A trained policy as an ONNX model (opset 17), for runtimes other than
// LibTorch (onnxruntime, TensorRT, browsers): the same inputs, outputs,
// baked-in normalisation and action post-processing as the TorchScript
// export (policy/policy_export.h), written from the policy's config and
// weights node by node (Gemm, Conv, MaxPool, the LSTM and GRU cells from
// their gates, ArgMax, Clip, Where for masks; RandomUniformLike /
// RandomNormalLike for sampled actions).
//
// No ONNX runtime is linked here: //policy:onnx_export_test runs the files
// in onnxruntime (PyPI, pinned) against the policy on 1,000 observations,
// and checks them with onnx.checker.
#ifndef RL_POLICY_ONNX_EXPORT_H_
#define RL_POLICY_ONNX_EXPORT_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "policy/actor_critic.h"
#include "policy/policy_export.h"
#include "proto/common.pb.h"

namespace rl {

// The serialized ONNX ModelProto of `policy` trained on `env`.
// INVALID_ARGUMENT if the policy's weights lack what its config says it
// has.
absl::StatusOr<std::string> OnnxModel(ActorCritic& policy, const EnvSpec& env,
                                      const PolicyExportOptions& options);

// Writes OnnxModel to `path` and the sidecar (PolicySidecar, format "onnx")
// to `path` + ".json".
absl::Status ExportOnnx(ActorCritic& policy, const EnvSpec& env,
                        const PolicyExportOptions& options,
                        const std::string& path);

}  // namespace rl

#endif  // RL_POLICY_ONNX_EXPORT_H_
