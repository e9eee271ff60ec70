#include "learner/learner_service.h"

#include <atomic>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc_message.h"
#include "common/grpc_status.h"
#include "common/latest_write.h"
#include "common/secrets.h"
#include "common/security.h"

namespace rl {
namespace {

class RolloutStreamReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // `actor_id` >= 0: the only actor whose segments this stream may carry
  // (its caller presented that actor's key).
  RolloutStreamReactor(std::shared_ptr<LearnerCore> core,
                       std::unique_ptr<StreamPlace> place, int actor_id)
      : place_(std::move(place)),
        core_(std::move(core)),
        keyed_actor_(actor_id) {
    StartRead(&incoming_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // The actor closed its side (or the stream broke).
      FinishOnce(grpc::Status::OK);
      return;
    }
    const int64_t bytes = static_cast<int64_t>(incoming_.Length());
    if (bytes > core_->max_segment_bytes()) {
      incoming_.Clear();
      FinishOnce(ToGrpcStatus(
          core_->RejectSegment(absl::ResourceExhaustedError(absl::StrCat(
              "segment: ", bytes,
              " bytes, more than a segment of this run "
              "can be (",
              core_->max_segment_bytes(),
              " bytes: envs_per_actor x segment_length x the env's sizes, "
              "twice over)")))));
      return;
    }
    auto segment = std::make_unique<RolloutSegment>();
    absl::Status status = ParseByteBuffer(&incoming_, segment.get(), "segment");
    incoming_.Clear();
    if (!status.ok()) {
      FinishOnce(ToGrpcStatus(core_->RejectSegment(status)));
      return;
    }
    if (keyed_actor_ >= 0 && segment->actor_id() != keyed_actor_) {
      FinishOnce(ToGrpcStatus(
          core_->RejectSegment(absl::PermissionDeniedError(absl::StrCat(
              "segment.actor_id: this stream presented actor ", keyed_actor_,
              "'s key and may carry only its segments (got ",
              segment->actor_id(), ")")))));
      return;
    }
    if (stream_id_ == 0) {
      stream_id_ = core_->OpenStream(
          segment->actor_id(), [this](const RolloutAck& ack) { Ack(ack); });
    }
    status = core_->SubmitSegment(stream_id_, std::move(segment));
    if (!status.ok()) {
      FinishOnce(ToGrpcStatus(status));
      return;
    }
    StartRead(&incoming_);
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    if (acks_.Done() && ok && !finished_) WriteLocked();
  }

  void OnDone() override {
    if (stream_id_ != 0) core_->CloseStream(stream_id_);
    delete this;
  }

 private:
  // From the core's PPO thread.
  void Ack(const RolloutAck& ack) {
    absl::MutexLock lock(&mu_);
    if (acks_.Offer(ack) && !finished_) WriteLocked();
  }

  void WriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    outgoing_ = SerializeCopy(acks_.Start());
    StartWrite(&outgoing_);
  }

  void FinishOnce(const grpc::Status& status) {
    absl::MutexLock lock(&mu_);
    if (finished_) return;
    finished_ = true;
    Finish(status);
  }

  std::unique_ptr<StreamPlace> place_;  // given back when deleted
  std::shared_ptr<LearnerCore> core_;
  const int keyed_actor_;      // -1: any actor of the run
  int64_t stream_id_ = 0;      // Only touched by the read path.
  grpc::ByteBuffer incoming_;  // Only touched by the read path.
  absl::Mutex mu_;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  // One ack in flight, the newest waiting (an ack says all before it).
  LatestWrite<RolloutAck> acks_ ABSL_GUARDED_BY(mu_);
  grpc::ByteBuffer outgoing_ ABSL_GUARDED_BY(mu_);
};

class PolicyStreamReactor final
    : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  PolicyStreamReactor(std::shared_ptr<LearnerCore> core, int64_t have_version,
                      std::unique_ptr<StreamPlace> place)
      : place_(std::move(place)),
        core_(std::move(core)),
        sent_version_(have_version) {
    std::shared_ptr<const PolicyUpdate> latest;
    subscriber_ = core_->Subscribe(
        [this](std::shared_ptr<const PolicyUpdate> update) {
          Offer(std::move(update));
        },
        &latest);
    if (latest != nullptr) Offer(std::move(latest));
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    const bool more = updates_.Done();
    if (!ok) {
      FinishLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE, "write failed"));
      return;
    }
    if (cancelled_) {  // OnCancel came while this write was in flight
      FinishLocked(grpc::Status::CANCELLED);
      return;
    }
    sent_version_ = in_flight_->version();
    if (in_flight_->final()) {
      FinishLocked(grpc::Status::OK);
      return;
    }
    // A newer version, or the final one (same version, final flag) that
    // arrived while its non-final twin was being written.
    if (more) WriteLocked();
  }

  // The subscriber hung up (or the server is shutting down). A write in
  // flight ends in OnWriteDone(false), which finishes; an idle stream must
  // finish here, or it would hold Server::Shutdown() for ever.
  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    if (!updates_.writing()) FinishLocked(grpc::Status::CANCELLED);
  }

  void OnDone() override {
    core_->Unsubscribe(subscriber_);
    delete this;
  }

 private:
  void Offer(std::shared_ptr<const PolicyUpdate> update) {
    absl::MutexLock lock(&mu_);
    // Only what the subscriber lacks: a version after the one it has (or
    // that is being written), or the final one.
    const int64_t have =
        updates_.writing() ? in_flight_->version() : sent_version_;
    if (finished_ || (update->version() <= have && !update->final())) return;
    if (updates_.Offer(std::move(update))) WriteLocked();
  }

  void WriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    in_flight_ = updates_.Start();
    // Shared, not copied: the tensor bytes are written from the one
    // PolicyUpdate of this version, which the buffer keeps alive.
    outgoing_ = SerializeAliased(in_flight_);
    StartWrite(&outgoing_);
  }

  void FinishLocked(const grpc::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    finished_ = true;
    Finish(status);
  }

  std::unique_ptr<StreamPlace> place_;  // given back when deleted
  std::shared_ptr<LearnerCore> core_;
  int64_t subscriber_ = 0;
  absl::Mutex mu_;
  int64_t sent_version_ ABSL_GUARDED_BY(mu_);
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  // One version in flight, the newest waiting (a later version, or the
  // final twin of the same one, replaces it).
  LatestWrite<std::shared_ptr<const PolicyUpdate>> updates_ ABSL_GUARDED_BY(
      mu_){[](const std::shared_ptr<const PolicyUpdate>& waiting,
              const std::shared_ptr<const PolicyUpdate>& incoming) {
    return incoming->version() >= waiting->version();
  }};
  std::shared_ptr<const PolicyUpdate> in_flight_ ABSL_GUARDED_BY(mu_);
  grpc::ByteBuffer outgoing_ ABSL_GUARDED_BY(mu_);
};

const grpc::Status kNoRun(grpc::StatusCode::UNAVAILABLE,
                          "this learner does not serve that run (yet)");

// A stream that fails at once (no run to serve, or too many streams).
template <typename Base>
class Refused final : public Base {
 public:
  explicit Refused(const grpc::Status& status = kNoRun) {
    this->Finish(status);
  }
  void OnDone() override { delete this; }
};

}  // namespace

void LearnerServiceImpl::SetCore(std::shared_ptr<LearnerCore> core,
                                 std::string run_key) {
  absl::MutexLock lock(&mu_);
  core_ = std::move(core);
  run_key_ = std::move(run_key);
}

grpc::Status LearnerServiceImpl::Admit(grpc::CallbackServerContext* context,
                                       std::shared_ptr<LearnerCore>* core,
                                       int* actor_id) {
  *actor_id = -1;
  std::string run_key;
  {
    absl::MutexLock lock(&mu_);
    *core = core_;
    run_key = run_key_;
  }
  if (run_key.empty()) return grpc::Status::OK;
  const auto& metadata = context->client_metadata();
  auto value = [&](const char* name) {
    const auto it = metadata.find(name);
    return it == metadata.end()
               ? absl::string_view()
               : absl::string_view(it->second.data(), it->second.size());
  };
  const absl::string_view presented = value(kRunKeyMetadata);
  if (ConstantTimeEquals(presented, run_key)) return grpc::Status::OK;
  int claimed = -1;
  if (absl::SimpleAtoi(value(kActorIdMetadata), &claimed) && claimed >= 0 &&
      ConstantTimeEquals(presented, ActorKey(run_key, claimed))) {
    *actor_id = claimed;
    return grpc::Status::OK;
  }
  core->reset();
  return grpc::Status(
      grpc::StatusCode::PERMISSION_DENIED,
      absl::StrCat(presented.empty() ? "no" : "a wrong", " ", kRunKeyMetadata,
                   ": this learner takes segments and policy subscriptions "
                   "only from workers assigned to its run"));
}

std::shared_ptr<LearnerCore> LearnerServiceImpl::core() {
  absl::MutexLock lock(&mu_);
  return core_;
}

namespace {

StreamQuotaOptions LearnerStreamQuota(int max_streams,
                                      int max_streams_per_client) {
  StreamQuotaOptions options;
  options.max_total = max_streams;
  options.max_per_client = max_streams_per_client;
  options.server = "this learner";
  options.total_flag = "--max_streams";
  options.per_client_flag = "--max_streams_per_client";
  return options;
}

}  // namespace

LearnerServiceImpl::LearnerServiceImpl(std::shared_ptr<LearnerCore> core,
                                       int max_streams,
                                       int max_streams_per_client,
                                       std::shared_ptr<const Security> security)
    : security_(security != nullptr ? std::move(security)
                                    : Security::ProcessDefault()),
      streams_(LearnerStreamQuota(max_streams, max_streams_per_client)),
      core_(std::move(core)) {}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
LearnerServiceImpl::StreamRollouts(grpc::CallbackServerContext* context) {
  using Reactor = grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>;
  std::shared_ptr<LearnerCore> core;
  int actor_id = -1;
  if (grpc::Status admitted = Admit(context, &core, &actor_id);
      !admitted.ok()) {
    return new Refused<Reactor>(admitted);
  }
  if (core == nullptr) return new Refused<Reactor>();
  absl::StatusOr<std::unique_ptr<StreamPlace>> place =
      streams_.Take(CallerClient(*context, *security_));
  if (!place.ok()) return new Refused<Reactor>(ToGrpcStatus(place.status()));
  return new RolloutStreamReactor(std::move(core), *std::move(place), actor_id);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* LearnerServiceImpl::SubscribePolicy(
    grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* request_bytes) {
  using Reactor = grpc::ServerWriteReactor<grpc::ByteBuffer>;
  SubscribePolicyRequest request;
  grpc::ByteBuffer bytes = *request_bytes;  // shares the slices
  if (const absl::Status parsed = ParseByteBuffer(&bytes, &request, "request");
      !parsed.ok()) {
    return new Refused<Reactor>(ToGrpcStatus(parsed));
  }
  std::shared_ptr<LearnerCore> core;
  int actor_id = -1;  // any actor of the run may follow the policy
  if (grpc::Status admitted = Admit(context, &core, &actor_id);
      !admitted.ok()) {
    return new Refused<Reactor>(admitted);
  }
  // A subscriber of another run (its assignment reached it before this
  // learner switched runs) must not get this run's weights: it retries.
  if (core == nullptr ||
      (!request.run_id().empty() && !core->run_id().empty() &&
       request.run_id() != core->run_id())) {
    return new Refused<Reactor>();
  }
  absl::StatusOr<std::unique_ptr<StreamPlace>> place =
      streams_.Take(CallerClient(*context, *security_));
  if (!place.ok()) return new Refused<Reactor>(ToGrpcStatus(place.status()));
  return new PolicyStreamReactor(std::move(core), request.have_version(),
                                 *std::move(place));
}

grpc::ServerUnaryReactor* LearnerServiceImpl::GetStatus(
    grpc::CallbackServerContext* context, const GetLearnerStatusRequest*,
    LearnerStatus* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  std::shared_ptr<LearnerCore> core = this->core();
  if (core == nullptr) {
    reactor->Finish(kNoRun);
    return reactor;
  }
  *response = core->GetStatus();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace rl
