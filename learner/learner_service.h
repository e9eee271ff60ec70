// LearnerService over gRPC's callback API. Reactors only convert messages
// and move them into the LearnerCore; the PPO loop never waits on the
// network.
//
// StreamRollouts and SubscribePolicy are registered raw (ByteBuffers): a
// segment is parsed by ParseByteBuffer (an error names the field) and a
// policy is written with SerializeAliased, its tensor bytes going to the
// socket straight from the one PolicyUpdate every subscriber shares
// (common/grpc_message.h). The wire format is the protobuf one.
//
// StreamRollouts reactor: Read segment -> core.SubmitSegment -> Read next;
// acks from the core are written one at a time (a newer ack replaces one
// not yet written); a bad segment finishes the stream with the core's
// status. SubscribePolicy reactor: writes the latest version, then each
// newer one (intermediate versions may be skipped while a write is in
// flight); finishes after writing the final version.
#ifndef RL_LEARNER_LEARNER_SERVICE_H_
#define RL_LEARNER_LEARNER_SERVICE_H_

#include <atomic>
#include <memory>

#include "absl/synchronization/mutex.h"
#include "common/security.h"
#include "common/stream_quota.h"
#include "learner/learner_core.h"
#include "proto/learner.grpc.pb.h"

namespace rl {

// Raw StreamRollouts and SubscribePolicy, GetStatus with messages.
using LearnerServiceBase = LearnerService::WithRawCallbackMethod_StreamRollouts<
    LearnerService::WithRawCallbackMethod_SubscribePolicy<
        LearnerService::WithCallbackMethod_GetStatus<LearnerService::Service>>>;

class LearnerServiceImpl final : public LearnerServiceBase {
 public:
  // `core` may be null: calls then fail with UNAVAILABLE until SetCore.
  // At most `max_streams` rollout and policy streams at once (together),
  // and at most `max_streams_per_client` of them from one client (identity
  // and host: CallerClient); more are refused with RESOURCE_EXHAUSTED
  // naming the limit.
  // Callers are identified by `security`'s tokens (null: the process
  // default), per call.
  explicit LearnerServiceImpl(
      std::shared_ptr<LearnerCore> core = nullptr, int max_streams = 1024,
      int max_streams_per_client = 256,
      std::shared_ptr<const Security> security = nullptr);

  // Switches the run this server serves (a learner worker gets a new core
  // per assignment). Streams already open keep the core they started with.
  // With a `run_key` (Assignment.run_key), rollout streams and policy
  // subscriptions must present it (metadata kRunKeyMetadata), else
  // PERMISSION_DENIED: only workers assigned to the run feed it.
  void SetCore(std::shared_ptr<LearnerCore> core, std::string run_key = "")
      ABSL_LOCKS_EXCLUDED(mu_);

  // RolloutSegment in, RolloutAck out.
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* StreamRollouts(
      grpc::CallbackServerContext* context) override;
  // SubscribePolicyRequest in, PolicyUpdate out.
  grpc::ServerWriteReactor<grpc::ByteBuffer>* SubscribePolicy(
      grpc::CallbackServerContext* context,
      const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* context,
                                      const GetLearnerStatusRequest* request,
                                      LearnerStatus* response) override;

  int open_streams() const { return streams_.open(); }
  // Streams refused by --max_streams / --max_streams_per_client so far.
  int64_t refused_streams() const { return streams_.refused_total(); }
  int64_t refused_streams_per_client() const {
    return streams_.refused_per_client();
  }

 private:
  std::shared_ptr<LearnerCore> core() ABSL_LOCKS_EXCLUDED(mu_);
  // The core, if the caller may feed it: PERMISSION_DENIED for a missing
  // or wrong run key.
  // A caller that presents the run's key may stream as any actor
  // (`*actor_id` -1); one that presents an actor's key, only as that actor.
  grpc::Status Admit(grpc::CallbackServerContext* context,
                     std::shared_ptr<LearnerCore>* core, int* actor_id)
      ABSL_LOCKS_EXCLUDED(mu_);

  const std::shared_ptr<const Security> security_;
  StreamQuota streams_;

  absl::Mutex mu_;
  std::shared_ptr<LearnerCore> core_ ABSL_GUARDED_BY(mu_);
  std::string run_key_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rl

#endif  // RL_LEARNER_LEARNER_SERVICE_H_
