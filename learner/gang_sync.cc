#include "learner/gang_sync.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace rl {

std::vector<torch::Tensor> WeightsAndStatistics(ActorCritic& policy) {
  std::vector<torch::Tensor> all = policy->parameters();
  for (const auto& b : policy->buffers()) all.push_back(b);
  return all;
}

absl::Status ShareRankZeroState(Collective& collective, ActorCritic& policy,
                                torch::optim::Optimizer& optimizer,
                                TensorMap* extra) {
  std::string bytes;
  if (collective.rank() == 0) {
    ASSIGN_OR_RETURN(bytes, EncodeTrainingState(policy, optimizer, *extra));
  }
  RETURN_IF_ERROR(BroadcastBytes(collective, &bytes, 0));
  if (collective.rank() != 0) {
    extra->clear();
    RETURN_IF_ERROR(DecodeTrainingState(bytes, policy, &optimizer, extra));
  }
  return CheckInSync(collective, WeightsAndStatistics(policy),
                     "at start, the weights");
}

absl::StatusOr<std::vector<AckWatermark>> GatherWatermarks(
    Collective& collective, const std::vector<AckWatermark>& mine) {
  TrainingState own;
  for (const AckWatermark& w : mine) *own.add_acked_segments() = w;
  std::vector<AckWatermark> all;
  for (int root = 0; root < collective.world_size(); ++root) {
    std::string bytes =
        root == collective.rank() ? own.SerializeAsString() : std::string();
    RETURN_IF_ERROR(BroadcastBytes(collective, &bytes, root));
    TrainingState theirs;
    if (!theirs.ParseFromString(bytes)) {
      return absl::InternalError(absl::StrCat(
          "rank ", root, " sent acknowledged segments that do not parse"));
    }
    all.insert(all.end(), theirs.acked_segments().begin(),
               theirs.acked_segments().end());
  }
  return all;
}

std::vector<AckWatermark> MergeWatermarks(
    const std::vector<AckWatermark>& known,
    const std::vector<AckWatermark>& gathered,
    const std::vector<AckWatermark>& streamed_here) {
  std::map<int, AckWatermark> by_actor;
  for (const auto* layer : {&known, &gathered, &streamed_here}) {
    for (const AckWatermark& w : *layer) by_actor[w.actor_id()] = w;
  }
  std::vector<AckWatermark> out;
  for (const auto& [actor, w] : by_actor) {
    if (w.sequence_number() > 0) out.push_back(w);
  }
  return out;
}

}  // namespace rl
