#include "learner/learner_service.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc_message.h"
#include "common/grpc_status.h"
#include "common/logging.h"
#include "common/secrets.h"
#include "common/security.h"
#include "common/shared_segments.h"
#include "common/status.h"
#include "common/stream_reactor.h"

namespace rl {
namespace {

// StreamRollouts: reads segments into the core; writes the newest ack (an
// ack says all before it). Ends OK when the actor closes its side.
class RolloutStreamReactor final
    : public BidiStreamReactor<grpc::ByteBuffer, grpc::ByteBuffer,
                               NewestWaiting<RolloutAck>> {
 public:
  // `actor_id` >= 0: the only actor whose segments this stream may carry
  // (its caller presented that actor's key).
  // `offer`: the actor's shared memory (x-rl-shared-segments; empty:
  // none), taken when this host has it; `peer` names the actor in logs.
  RolloutStreamReactor(std::shared_ptr<LearnerCore> core,
                       std::unique_ptr<StreamPlace> place, int actor_id,
                       absl::string_view offer, const std::string& peer)
      : place_(std::move(place)),
        core_(std::move(core)),
        keyed_actor_(actor_id),
        shared_(OpenShared(offer, core_->max_segment_bytes(), peer)) {
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
      // Final for the actor (actor/learner_link.cc, RefusedForGood, matches
      // "more than a segment of this run can be"): resent, it is refused
      // again.
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
    if (segment->has_shared()) {
      absl::StatusOr<std::unique_ptr<RolloutSegment>> whole =
          ReadShared(*segment);
      if (!whole.ok()) {
        FinishOnce(ToGrpcStatus(core_->RejectSegment(whole.status())));
        return;
      }
      segment = *std::move(whole);
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
      // From the core's PPO thread.
      stream_id_ = core_->OpenStream(
          segment->actor_id(), [this](const RolloutAck& ack) { Send(ack); });
    }
    status = core_->SubmitSegment(stream_id_, std::move(segment));
    if (!status.ok()) {
      FinishOnce(ToGrpcStatus(status));
      return;
    }
    StartRead(&incoming_);
  }

 private:
  static std::unique_ptr<SharedSegmentReader> OpenShared(
      absl::string_view offer, int64_t max_segment_bytes,
      const std::string& peer) {
    if (offer.empty()) {
      RL_LOG_INFO(
          "rollout stream from {}: segments as gRPC bytes (no shared "
          "memory offered)",
          peer);
      return nullptr;
    }
    // Protobuf parses at most 2^31 - 1 bytes.
    absl::StatusOr<std::unique_ptr<SharedSegmentReader>> reader =
        SharedSegmentReader::Open(
            offer, std::min<int64_t>(max_segment_bytes,
                                     std::numeric_limits<int>::max()));
    if (!reader.ok()) {
      RL_LOG_INFO(
          "rollout stream from {}: segments as gRPC bytes; the shared "
          "memory offered cannot be opened here: {}",
          peer, reader.status().ToString());
      return nullptr;
    }
    RL_LOG_INFO(
        "rollout stream from {}: segments through shared memory of {} "
        "({} slots)",
        peer, (*reader)->name(), (*reader)->slots());
    return *std::move(reader);
  }

  // The segment an envelope's `shared` slot holds, checked against it.
  absl::StatusOr<std::unique_ptr<RolloutSegment>> ReadShared(
      const RolloutSegment& envelope) {
    if (shared_ == nullptr) {
      return absl::InvalidArgumentError(
          "segment.shared: this stream has no shared memory (none was "
          "offered, or this learner could not open it; see "
          "RolloutAck.shared_memory): send the segment's bytes");
    }
    // Nothing else may ride beside the reference: it would be ignored.
    RolloutSegment rest = envelope;
    rest.clear_run_id();
    rest.clear_actor_id();
    rest.clear_sequence_number();
    rest.clear_actor_incarnation();
    rest.clear_shared();
    if (rest.ByteSizeLong() != 0) {
      return absl::InvalidArgumentError(
          "segment.shared: a segment in shared memory carries only run_id, "
          "actor_id, sequence_number and actor_incarnation beside `shared`; "
          "the rest lies in the slot");
    }
    ASSIGN_OR_RETURN(
        const absl::string_view bytes,
        shared_->View({envelope.shared().slot(), envelope.shared().length()},
                      "segment.shared"));
    // Straight from the actor's slot: the one copy is into the segment.
    auto segment = std::make_unique<RolloutSegment>();
    if (!segment->ParseFromArray(bytes.data(),
                                 static_cast<int>(bytes.size()))) {
      return absl::InvalidArgumentError(
          absl::StrCat("segment.shared: slot ", envelope.shared().slot(),
                       " holds no RolloutSegment"));
    }
    if (segment->has_shared() || segment->run_id() != envelope.run_id() ||
        segment->actor_id() != envelope.actor_id() ||
        segment->sequence_number() != envelope.sequence_number() ||
        segment->actor_incarnation() != envelope.actor_incarnation()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "segment.shared: slot ", envelope.shared().slot(), " holds segment ",
          segment->sequence_number(), " of actor ", segment->actor_id(),
          segment->has_shared() ? " (itself a reference to shared memory)" : "",
          ", not the envelope's segment ", envelope.sequence_number(),
          " of actor ", envelope.actor_id()));
    }
    return segment;
  }

  void ToMessageLocked(RolloutAck ack, grpc::ByteBuffer* out) override {
    ack.set_shared_memory(shared_ != nullptr);
    *out = SerializeCopy(ack);
  }

  void OnStop() override {
    if (stream_id_ != 0) core_->CloseStream(stream_id_);
  }

  std::unique_ptr<StreamPlace> place_;  // given back when deleted
  std::shared_ptr<LearnerCore> core_;
  const int keyed_actor_;      // -1: any actor of the run
  int64_t stream_id_ = 0;      // Only touched by the read path.
  grpc::ByteBuffer incoming_;  // Only touched by the read path.
  // The actor's shared memory, when this stream took it (null: none).
  // Viewed only by the read path.
  const std::unique_ptr<SharedSegmentReader> shared_;
};

// SubscribePolicy: each version the subscriber lacks, newest first; OK after
// the final one. A subscriber that asks for the league's pool gets it with
// the first (SubscribePolicyRequest.league_pool).
class PolicyStreamReactor final
    : public StreamWriteReactor<
          grpc::ByteBuffer,
          NewestWaiting<std::shared_ptr<const PolicyUpdate>>> {
 public:
  PolicyStreamReactor(std::shared_ptr<LearnerCore> core, int64_t have_version,
                      bool league_pool, std::unique_ptr<StreamPlace> place)
      // One version in flight, the newest waiting (a later version, or the
      // final twin of the same one, replaces it).
      : StreamWriteReactor(NewestWaiting<std::shared_ptr<const PolicyUpdate>>(
            [](const std::shared_ptr<const PolicyUpdate>& waiting,
               const std::shared_ptr<const PolicyUpdate>& incoming) {
              return incoming->version() >= waiting->version();
            })),
        place_(std::move(place)),
        core_(std::move(core)),
        sent_version_(have_version) {
    if (league_pool) {
      // The latest with the league's kept versions goes first, offered
      // before subscribing: a version published meanwhile comes after it
      // and cannot take its place.
      std::shared_ptr<const PolicyUpdate> first =
          core_->LatestPolicyWithLeaguePool();
      if (first != nullptr) Offer(std::move(first));
    }
    std::shared_ptr<const PolicyUpdate> latest;
    subscriber_ = core_->Subscribe(
        [this](std::shared_ptr<const PolicyUpdate> update) {
          Offer(std::move(update));
        },
        &latest);
    if (latest != nullptr) Offer(std::move(latest));
  }

 private:
  void Offer(std::shared_ptr<const PolicyUpdate> update) {
    absl::MutexLock lock(&mu_);
    // Only what the subscriber lacks: a version after the one it has (or
    // that is being written), or the final one.
    const int64_t have =
        writing_locked() ? in_flight_->version() : sent_version_;
    if (update->version() <= have && !update->final()) return;
    SendLocked(std::move(update));  // never full
  }

  void ToMessageLocked(std::shared_ptr<const PolicyUpdate> update,
                       grpc::ByteBuffer* out) override {
    in_flight_ = std::move(update);
    // Shared, not copied: the tensor bytes are written from the one
    // PolicyUpdate of this version, which the buffer keeps alive.
    *out = SerializeAliased(in_flight_);
  }

  // A newer version, or the final one (same version, final flag) that
  // arrived while its non-final twin was being written, goes next.
  void OnWrittenLocked(const grpc::ByteBuffer&) override {
    sent_version_ = in_flight_->version();
    if (in_flight_->final()) FinishLocked(grpc::Status::OK);
  }

  void OnStop() override { core_->Unsubscribe(subscriber_); }

  std::unique_ptr<StreamPlace> place_;  // given back when deleted
  std::shared_ptr<LearnerCore> core_;
  int64_t subscriber_ = 0;
  int64_t sent_version_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const PolicyUpdate> in_flight_ ABSL_GUARDED_BY(mu_);
};

// A client metadata entry of the call (empty: none).
absl::string_view MetadataValue(const grpc::CallbackServerContext& context,
                                const char* name) {
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find(name);
  return it == metadata.end()
             ? absl::string_view()
             : absl::string_view(it->second.data(), it->second.size());
}

const grpc::Status kNoRun(grpc::StatusCode::UNAVAILABLE,
                          "this learner does not serve that run (yet)");

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
  auto value = [&](const char* name) { return MetadataValue(*context, name); };
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
    return new RefusedStream<Reactor>(admitted);
  }
  if (core == nullptr) return new RefusedStream<Reactor>(kNoRun);
  absl::StatusOr<std::unique_ptr<StreamPlace>> place =
      streams_.Take(CallerClient(*context, *security_));
  if (!place.ok())
    return new RefusedStream<Reactor>(ToGrpcStatus(place.status()));
  return new RolloutStreamReactor(
      std::move(core), *std::move(place), actor_id,
      MetadataValue(*context, kSharedSegmentsMetadata), context->peer());
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* LearnerServiceImpl::SubscribePolicy(
    grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* request_bytes) {
  using Reactor = grpc::ServerWriteReactor<grpc::ByteBuffer>;
  SubscribePolicyRequest request;
  grpc::ByteBuffer bytes = *request_bytes;  // shares the slices
  if (const absl::Status parsed = ParseByteBuffer(&bytes, &request, "request");
      !parsed.ok()) {
    return new RefusedStream<Reactor>(ToGrpcStatus(parsed));
  }
  std::shared_ptr<LearnerCore> core;
  int actor_id = -1;  // any actor of the run may follow the policy
  if (grpc::Status admitted = Admit(context, &core, &actor_id);
      !admitted.ok()) {
    return new RefusedStream<Reactor>(admitted);
  }
  // A subscriber of another run (its assignment reached it before this
  // learner switched runs) must not get this run's weights: it retries.
  if (core == nullptr ||
      (!request.run_id().empty() && !core->run_id().empty() &&
       request.run_id() != core->run_id())) {
    return new RefusedStream<Reactor>(kNoRun);
  }
  absl::StatusOr<std::unique_ptr<StreamPlace>> place =
      streams_.Take(CallerClient(*context, *security_));
  if (!place.ok())
    return new RefusedStream<Reactor>(ToGrpcStatus(place.status()));
  return new PolicyStreamReactor(std::move(core), request.have_version(),
                                 request.league_pool(), *std::move(place));
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
