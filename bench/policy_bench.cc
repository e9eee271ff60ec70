// Training throughput of each policy kind on one image task, side by side
// in one run: env steps/s of the whole loop (collection + PPO updates) with
// the MLP, the Nature CNN, the IMPALA CNN, and the MLP with an LSTM or a
// GRU core (128 units), on the same uint8 images
// (envs/testdata/pixel_plugin.cc at 36x36x1), and each one's ratio to the
// first (the MLP), with where the time goes.
//
//   bazel run --config=opt //bench:policy_bench -- [--steps=20480] [--size=36]
//       [--kinds=mlp,nature_cnn,impala_cnn,mlp+lstm,mlp+gru]
#include <torch/utils.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/bench_files.h"
#include "runspec/run_spec.h"
#include "trainer/local_trainer.h"

ABSL_FLAG(int64_t, steps, 20480, "environment steps per policy");
ABSL_FLAG(int, size, 36, "image side (>= 36 for the Nature CNN)");
ABSL_FLAG(std::vector<std::string>, kinds,
          std::vector<std::string>({"mlp", "nature_cnn", "impala_cnn",
                                    "mlp+lstm", "mlp+gru"}),
          "policies (encoder[+core]) to run, in order; the first is the "
          "others' yardstick");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  torch::set_num_threads(1);  // as rl_local
  const int size = absl::GetFlag(FLAGS_size);
  const std::string plugin =
      rl::BenchFilePath("envs/testdata/libpixel_plugin.so");
  std::printf(
      "pixel env %dx%dx1 uint8, 16 envs x 128 steps, 4 epochs x 4 "
      "minibatches, %lld steps per policy, 1 LibTorch thread\n",
      size, size, static_cast<long long>(absl::GetFlag(FLAGS_steps)));
  double first_sps = 0;
  for (const std::string& kind : absl::GetFlag(FLAGS_kinds)) {
    const std::vector<std::string> parts = absl::StrSplit(kind, '+');
    const std::string encoder = parts[0];
    const std::string core = parts.size() > 1 ? parts[1] : "none";
    auto spec = rl::LoadRunSpec(
        absl::StrCat("name: bench\nenv: {id: Pixels-v0, plugin: ", plugin,
                     ", kwargs: {size: ", size, "}, observation_shape: [", size,
                     ", ", size,
                     ", 1], observation_dtype: uint8, num_discrete_actions: 4, "
                     "reward_low: 0, reward_high: 1}\n"
                     "envs_per_actor: 16\nsegment_length: 128\n"
                     "total_env_steps: ",
                     absl::GetFlag(FLAGS_steps),
                     "\nppo: {num_epochs: 4, num_minibatches: 4}\n"
                     "policy: {encoder: ",
                     encoder, ", core: ", core, "}\n"),
        rl::RunFileFormat::kYaml);
    if (!spec.ok()) {
      std::fprintf(stderr, "%s\n", spec.status().ToString().c_str());
      return 1;
    }
    auto trainer = rl::LocalTrainer::Create(*spec, {});
    if (!trainer.ok()) {
      std::fprintf(stderr, "%s\n", trainer.status().ToString().c_str());
      return 1;
    }
    auto result = (*trainer)->Train();
    if (!result.ok()) {
      std::fprintf(stderr, "%s\n", result.status().ToString().c_str());
      return 1;
    }
    const double sps = result->progress.steps_per_second;
    if (first_sps == 0) first_sps = sps;
    const rl::TimeBreakdown& t = result->time;
    const double total = t.env + t.inference + t.gae + t.update + t.other;
    std::printf(
        "%-16s %8.0f env steps/s  %.2fx the first | env %.2f inference "
        "%.2f update %.2f | return %.2f\n",
        kind.c_str(), sps, sps / first_sps, t.env / total, t.inference / total,
        t.update / total, result->progress.mean_return);
    std::fflush(stdout);
  }
  return 0;
}
