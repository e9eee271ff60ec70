// LearnerService over gRPC's callback API. Reactors only convert messages
// and move them into the LearnerCore; the PPO loop never waits on the
// network.
//
// StreamRollouts reactor: Read segment -> core.SubmitSegment -> Read next;
// acks from the core are written one at a time (a newer ack replaces one
// not yet written); a bad segment finishes the stream with the core's
// status. SubscribePolicy reactor: writes the latest version, then each
// newer one (intermediate versions may be skipped while a write is in
// flight); finishes after writing the final version.
#ifndef RL_LEARNER_LEARNER_SERVICE_H_
#define RL_LEARNER_LEARNER_SERVICE_H_

#include "learner/learner_core.h"
#include "proto/learner.grpc.pb.h"

namespace rl {

class LearnerServiceImpl final : public LearnerService::CallbackService {
 public:
  explicit LearnerServiceImpl(LearnerCore* core) : core_(core) {}

  grpc::ServerBidiReactor<RolloutSegment, RolloutAck>* StreamRollouts(
      grpc::CallbackServerContext* context) override;
  grpc::ServerWriteReactor<PolicyUpdate>* SubscribePolicy(
      grpc::CallbackServerContext* context,
      const SubscribePolicyRequest* request) override;
  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* context,
                                      const GetLearnerStatusRequest* request,
                                      LearnerStatus* response) override;

 private:
  LearnerCore* core_;
};

}  // namespace rl

#endif  // RL_LEARNER_LEARNER_SERVICE_H_
