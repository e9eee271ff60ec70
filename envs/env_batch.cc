#include "envs/env_batch.h"

#include <algorithm>

namespace rl {
namespace {

template <typename Env>
void StepRange(const EnvBatch& batch, const typename Env::Action* actions,
               const StepBuffers& buffers, int64_t begin, int64_t end) {
  constexpr int kActionStride = Env::kNumActions > 0 ? 1 : Env::kActionSize;
  // Local copies: the compiler can then keep the array pointers in
  // registers (the stores below could otherwise alias the structs).
  const EnvBatch b = batch;
  const StepBuffers out = buffers;
  // Pass 1: physics for every environment; branch-free for CartPole, so
  // this loop vectorises. Rows are independent (ivdep), which spares the
  // compiler run-time alias checks between the many arrays.
#pragma GCC ivdep
  for (int64_t i = begin; i < end; ++i) {
    StepEnvPhysics<Env>(b, i, actions + i * kActionStride, out);
  }
  // Pass 2: the few environments whose episode ended.
  if (out.episode_returns != nullptr) {
    std::fill(out.episode_returns + begin, out.episode_returns + end, 0.0f);
  }
  if (out.episode_lengths != nullptr) {
    std::fill(out.episode_lengths + begin, out.episode_lengths + end, 0);
  }
  for (int64_t i = begin; i < end; ++i) {
    if (out.terminated[i] | out.truncated[i]) FinishEpisode<Env>(b, i, out);
  }
}

}  // namespace

void StepBatchCpu(EnvKind kind, const EnvBatch& b, const void* actions,
                  const StepBuffers& out, int64_t begin, int64_t end) {
  VisitEnvKind(kind, [&](auto env) {
    using Env = decltype(env);
    StepRange<Env>(b, static_cast<const typename Env::Action*>(actions), out,
                   begin, end);
  });
}

void ResetBatchCpu(EnvKind kind, const EnvBatch& b, float* observations,
                   int64_t begin, int64_t end) {
  VisitEnvKind(kind, [&](auto env) {
    using Env = decltype(env);
    for (int64_t i = begin; i < end; ++i) {
      ResetEnv<Env>(
          b, i,
          observations == nullptr ? nullptr : observations + i * Env::kObsSize);
    }
  });
}

}  // namespace rl
