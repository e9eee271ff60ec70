// A RolloutSegment from a peer -> LearnerCore::SubmitSegment, in-process (no
// gRPC): run id, numbering, the segment codec's validation (env, dtypes,
// shapes, finite values, action ranges), dedupe and the queue. Two cores for
// the whole process, one of float32 observations (CartPole) and one of uint8
// ones (a plugin's images), the segment going to the one its
// env.id names; their PPO threads train on what passes.
//
// libFuzzer exits with an update possibly running (the uint8 core's goes
// through LibTorch's matmul, not the fused path). An exit handler stops
// both cores first; it runs before the destructors of every static that
// existed when it was registered, so it is registered after LibTorch's
// matmul, autograd and Adam and spdlog have made their lazy statics.
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "common/logging.h"
#include "fuzz/fuzz_input.h"
#include "learner/learner_core.h"
#include "proto/learner.pb.h"
#include "runspec/run_spec.h"

namespace {

constexpr int kActorId = 0;

struct Learner {
  std::unique_ptr<rl::LearnerCore> core;
  int64_t stream_id = 0;
};

// CartPole's float32 observations, or uint8 [2, 2, 1] images of a plugin.
constexpr char kFloatEnv[] = "{id: CartPole-v1}";
constexpr char kByteEnv[] =
    "{id: Pixels-v0, plugin: libpixel_plugin.so, observation_shape: [2, 2, "
    "1], observation_dtype: uint8, num_discrete_actions: 4}";

Learner* MakeLearner(const char* env) {
  // 2 envs x 4 steps per segment (the seed corpus's shape), a budget no
  // fuzzing run reaches so the core never stops taking segments.
  auto spec =
      rl::LoadRunSpec(std::string("name: fuzz\nenv: ") + env +
                          "\nenvs_per_actor: 2\n"
                          "segment_length: 4\ntotal_env_steps: 1000000000000\n"
                          "ppo: {num_minibatches: 1, num_epochs: 1}\npolicy: "
                          "{encoder: mlp, hidden_sizes: [8]}\n"
                          "resources: {num_actors: 1}\n",
                      rl::RunFileFormat::kYaml);
  if (!spec.ok()) {
    std::fprintf(stderr, "%s\n", spec.status().ToString().c_str());
    std::abort();
  }
  rl::LearnerOptions options;
  options.spec = *spec;
  options.run_id = "fuzz";
  options.segment_budget = std::make_shared<rl::SegmentBudget>(64 << 20);
  auto core = rl::LearnerCore::Create(options);
  if (!core.ok()) {
    std::fprintf(stderr, "%s\n", core.status().ToString().c_str());
    std::abort();
  }
  auto* learner = new Learner;
  learner->core = *std::move(core);
  learner->stream_id =
      learner->core->OpenStream(kActorId, [](const rl::RolloutAck&) {});
  return learner;
}

Learner* learners[2] = {nullptr, nullptr};

void StopLearners() {
  for (Learner* learner : learners) learner->core->Stop();
}

bool StartLearners() {
  learners[0] = MakeLearner(kFloatEnv);
  learners[1] = MakeLearner(kByteEnv);
  // What an update makes lazily, made here first.
  RL_LOG_DEBUG("fuzz: warming up LibTorch before registering the exit stop");
  torch::nn::Linear layer(8, 8);
  torch::optim::Adam adam(layer->parameters());
  torch::tanh(layer->forward(torch::randn({16, 8}))).sum().backward();
  adam.step();
  return std::atexit(StopLearners) == 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool started = StartLearners();
  if (!started) std::abort();
  Learner* const floats = learners[0];
  Learner* const bytes = learners[1];
  auto segment = std::make_unique<rl::RolloutSegment>();
  if (!rl::ParseFuzzInput(data, size, segment.get())) return 0;
  // By env id, so that a segment of either env with the other dtype
  // reaches the codec's dtype check.
  Learner* learner = segment->env().id() == "Pixels-v0" ? bytes : floats;
  // The stream belongs to one actor; a segment naming another is refused
  // before any decoding, so steer the fuzzer past that check.
  segment->set_actor_id(kActorId);
  const absl::Status status =
      learner->core->SubmitSegment(learner->stream_id, std::move(segment));
  // RL_FUZZ_VERBOSE=1 with input files: why each was refused (seed checks).
  static const bool verbose = std::getenv("RL_FUZZ_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "%s\n", status.ToString().c_str());
  return 0;
}
