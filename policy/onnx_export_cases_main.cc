// Writes every export case (policy/export_cases.h) as an ONNX model, with
// its inputs and the policy's own outputs on them as .npy files, for
// //policy:onnx_export_test to run in onnxruntime:
//   onnx_export_cases DIR
// DIR/<case>.onnx (deterministic actions), DIR/<case>.sampled.onnx, and
// DIR/<case>.<tensor>.npy for obs, mask, state (inputs) and actions,
// values, next_state (the policy's deterministic outputs).
#include <torch/torch.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "policy/export_cases.h"
#include "policy/onnx_export.h"

namespace rl {
namespace {

// A tensor as NumPy's .npy (version 1.0, C order).
bool WriteNpy(const std::string& path, const torch::Tensor& value) {
  const torch::Tensor t = value.contiguous();
  const char* descr = t.scalar_type() == torch::kInt64   ? "<i8"
                      : t.scalar_type() == torch::kUInt8 ? "|u1"
                                                         : "<f4";
  std::vector<std::string> dims;
  for (int64_t d : t.sizes()) dims.push_back(absl::StrCat(d));
  std::string header = absl::StrCat(
      "{'descr': '", descr, "', 'fortran_order': False, 'shape': (",
      absl::StrJoin(dims, ", "), dims.size() == 1 ? ",), }" : "), }");
  // Magic, version, header length: the whole header padded to 64 bytes.
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  const uint16_t size = static_cast<uint16_t>(header.size());
  out.write(reinterpret_cast<const char*>(&size), 2);
  out << header;
  out.write(static_cast<const char*>(t.data_ptr()),
            t.numel() * t.element_size());
  return static_cast<bool>(out);
}

int Main(const std::string& dir) {
  for (const ExportCase& c : ExportCases()) {
    torch::manual_seed(1);
    auto created = CreateActorCritic(c.config);
    if (!created.ok()) {
      std::fprintf(stderr, "%s: %s\n", c.name.c_str(),
                   created.status().ToString().c_str());
      return 1;
    }
    ActorCritic policy = *created;
    const std::vector<torch::Tensor> inputs = ExportInputs(c.config);
    if (c.config.normalize_observations &&
        !policy->UpdateObservationStatistics(inputs[0] + 1).ok()) {
      return 1;
    }
    const std::string base = absl::StrCat(dir, "/", c.name);
    for (const bool sampled : {false, true}) {
      PolicyExportOptions options;
      options.sampled = sampled;
      const absl::Status written = ExportOnnx(
          policy, c.env, options, base + (sampled ? ".sampled.onnx" : ".onnx"));
      if (!written.ok()) {
        std::fprintf(stderr, "%s: %s\n", c.name.c_str(),
                     written.ToString().c_str());
        return 1;
      }
    }
    torch::NoGradGuard no_grad;
    const torch::Tensor masks = inputs.size() > 1 ? inputs[1] : torch::Tensor();
    torch::Tensor state;
    bool ok = WriteNpy(base + ".obs.npy", inputs[0]);
    if (masks.defined()) ok &= WriteNpy(base + ".mask.npy", masks);
    if (policy->recurrent()) {
      state = torch::randn({inputs[0].size(0), policy->state_size()});
      ok &= WriteNpy(base + ".state.npy", state);
    }
    const PolicyStep want = policy->Act(inputs[0], c10::nullopt, true, masks,
                                        state.defined() ? &state : nullptr);
    torch::Tensor actions = want.actions;
    if (c.config.action_size > 0) {
      actions = actions.clamp(c.env.action_low(), c.env.action_high());
    }
    ok &= WriteNpy(base + ".actions.npy", actions);
    ok &= WriteNpy(base + ".values.npy", want.values);
    if (state.defined()) ok &= WriteNpy(base + ".next_state.npy", state);
    if (!ok) {
      std::fprintf(stderr, "%s: cannot write its .npy files\n", c.name.c_str());
      return 1;
    }
    std::printf("%s\n", c.name.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace rl

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: onnx_export_cases DIR\n");
    return 2;
  }
  return rl::Main(argv[1]);
}
