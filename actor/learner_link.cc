// ActorClient's link to the learner: the sender thread (encodes the step
// loop's handoffs, writes the window's segments on StreamRollouts, reopens
// the stream with backoff when it breaks), the ack reader thread of each
// StreamRollouts stream, and the policy thread (SubscribePolicy). The step
// loop and the client's lifecycle are in actor_client.cc.
#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "actor/actor_client.h"
#include "actor/actor_client_internal.h"
#include "common/grpc_message.h"
#include "common/grpc_status.h"
#include "common/logging.h"
#include "common/secrets.h"
#include "common/status.h"
#include "policy/device_transfer.h"
#include "policy/policy_codec.h"
#include "policy/segment_codec.h"
#include "policy/torch_status.h"
#include "runspec/named_policies.h"
#include "telemetry/client/emitter.h"

namespace rl {
namespace {

using actor_client_internal::FormatDelay;
using actor_client_internal::kPollInterval;
using actor_client_internal::SetThreadName;

// After WritesDone, how long the sender waits for the learner to end the
// stream before cancelling it.
constexpr absl::Duration kCloseTimeout = absl::Seconds(1);

// While the learner stays away, only every this many failed attempts of a
// stream is logged as a warning (the others at debug level).
constexpr int kWarnEveryFailures = 10;

// A refusal that a resend cannot change: the segment is malformed for the
// run (its shape, its values) or larger than the learner takes. A learner
// serving another run (it is switching runs) is not one of them.
bool RefusedForGood(const grpc::Status& status) {
  if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
    return !absl::StartsWith(status.error_message(), "segment.run_id");
  }
  // gRPC's own size limit, or the learner's for a segment of its run
  // (learner/learner_service.cc: "more than a segment of this run can be").
  return status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
         (absl::StrContains(status.error_message(), "larger than max") ||
          absl::StrContains(status.error_message(),
                            "more than a segment of this run can be"));
}

std::string Describe(const grpc::Status& status) {
  return FromGrpcStatus(status).ToString();
}

// A stream to `peer` ended and is opened again in `delay`, the `attempt`th
// time in a row (from 1): a warning every kWarnEveryFailures attempts, the
// others at debug level.
void LogReconnect(absl::string_view what, const std::string& peer,
                  const grpc::Status& status, absl::Duration delay,
                  int64_t attempt) {
  if ((attempt - 1) % kWarnEveryFailures == 0) {
    RL_LOG_WARNING("{} {} ended: {}; reconnecting in {} (attempt {})",
                   std::string(what), peer, Describe(status),
                   FormatDelay(delay), attempt);
  } else {
    RL_LOG_DEBUG("{} {} ended: {}; reconnecting in {}", std::string(what), peer,
                 Describe(status), FormatDelay(delay));
  }
}

// `rollout` on the host: itself, or a packed copy of one on a device in
// `staging` (page-locked, kept from segment to segment).
Rollout HostRollout(const Rollout& rollout, torch::Tensor* staging) {
  if (rollout.rewards.is_cpu()) return rollout;
  Rollout host = rollout;
  std::vector<torch::Tensor> on_device;
  for (torch::Tensor* t : host.Tensors()) on_device.push_back(*t);
  const std::vector<torch::Tensor> copied = ToHost(on_device, staging);
  for (size_t i = 0; i < copied.size(); ++i) *host.Tensors()[i] = copied[i];
  return host;
}

}  // namespace

Backoff ActorClient::MakeBackoff() const {
  Backoff::Options options;
  options.initial = options_.initial_backoff;
  options.max = options_.max_backoff;
  return Backoff(options);
}

void ActorClient::EncodeHandoff(const Handoff& handoff) {
  auto segment = std::make_shared<RolloutSegment>();
  segment->set_run_id(run_id_);
  segment->set_actor_id(options_.actor_id);
  segment->set_sequence_number(handoff.sequence_number);
  segment->set_actor_incarnation(window_->incarnation());
  segment->set_policy_version(handoff.policy_version);
  *segment->mutable_env() = env_spec_;
  // A segment collected on a GPU comes to the host in one packed copy, on
  // this sender thread (ordered on the GPU's default stream with the
  // collector's kernels; no copy stream of its own yet). A LibTorch error
  // there ends the run as an encoding error would.
  absl::StatusOr<Rollout> host =
      CatchTorchErrors("copying the segment to the host", [&] {
        Rollout rollout =
            HostRollout(buffers_[handoff.buffer], &staging_[handoff.buffer]);
        // A league's: the trained seats' rows only.
        return handoff.rows.defined() ? rollout.Rows(handoff.rows) : rollout;
      });
  const absl::Status status =
      host.ok() ? EncodeSegment(*host, segment.get()) : host.status();
  segment->mutable_episode_returns()->Add(handoff.episode_returns.begin(),
                                          handoff.episode_returns.end());
  segment->mutable_episode_lengths()->Add(handoff.episode_lengths.begin(),
                                          handoff.episode_lengths.end());
  for (const int64_t row : handoff.episode_rows) {
    segment->add_episode_rows(static_cast<int32_t>(row));
  }
  for (const LeagueMatch& m : handoff.matches) {
    LeagueMatchResult* out = segment->add_league_matches();
    out->set_env_steps(m.env_steps);
    out->set_learner_version(m.learner_version);
    out->set_opponent_version(m.opponent_version);
    out->set_learner_return(m.learner_return);
  }
  absl::MutexLock lock(&mu_);
  free_[handoff.buffer] = true;
  // A gap in sequence numbers is not allowed, so either error ends the run.
  if (!status.ok()) {
    sender_error_ = absl::InternalError(absl::StrCat(
        "encoding segment ", handoff.sequence_number, ": ", status.ToString()));
  } else if (absl::Status added = window_->Add(std::move(segment));
             !added.ok()) {
    sender_error_ = absl::InternalError(added.ToString());
  } else {
    return;
  }
  RL_LOG_ERROR("{}", sender_error_.ToString());
}

void ActorClient::AckReaderLoop(RawClientStream<RolloutAck>* stream,
                                SharedSegmentWriter* shared) {
  RolloutAck ack;
  bool first = true;
  while (stream->Read(&ack)) {
    if (shared != nullptr) {
      shared->Release(ack.acked_sequence_number());
      if (first && ack.shared_memory()) {
        RL_LOG_INFO("rollout stream to {}: segments go through shared memory",
                    options_.learner_address);
      } else if (first) {
        RL_LOG_INFO(
            "rollout stream to {}: segments go as gRPC bytes (the learner "
            "cannot open the shared memory offered: another host?)",
            options_.learner_address);
      }
    }
    first = false;
    absl::MutexLock lock(&mu_);
    stream_got_ack_ = true;
    stream_shared_ |= shared != nullptr && ack.shared_memory();
    last_connected_ = absl::Now();
    window_->OnAck(ack);
    counters_.segments_acked = window_->acked();
    counters_.dropped_stale = ack.dropped_stale();
  }
  absl::MutexLock lock(&mu_);
  stream_broken_ = true;
  ack_reader_done_ = true;
}

// Raw so that a segment's tensor bytes go from the window's encoded
// segment to the socket without another copy (common/grpc_message.h).
struct ActorClient::SenderState {
  explicit SenderState(Backoff b) : backoff(std::move(b)) {}
  Backoff backoff;
  absl::Time reconnect_at = absl::InfinitePast();
  std::unique_ptr<grpc::ClientContext> context;
  std::unique_ptr<RawClientStream<RolloutAck>> stream;
  NamedThread ack_reader;
  // The stream's offer of shared memory (null: none), read by ack_reader.
  std::unique_ptr<SharedSegmentWriter> shared;
  bool warned_shared = false;    // no shared memory could be made
  bool logged_fallback = false;  // a segment of this stream went as bytes
  // The learner could not read a slot (memory, mappings): bytes from now
  // on, or every stream would end the same way.
  bool shared_failed = false;
  int64_t streams_opened = 0;
  int failures = 0;  // consecutive streams that ended without an ack
};

void ActorClient::SenderLoop() {
  SenderState s(MakeBackoff());
  while (true) {
    std::optional<Handoff> handoff;
    std::optional<SegmentWindow::Write> write;
    switch (NextSenderAction(&s, &handoff, &write)) {
      case SenderAction::kNone:
        break;
      case SenderAction::kEncode:
        EncodeHandoff(*handoff);
        break;
      case SenderAction::kOpen:
        OpenRolloutStream(&s);
        break;
      case SenderAction::kWrite:
        WriteSegment(&s, *write);
        break;
      case SenderAction::kTeardown:
        TeardownRolloutStream(&s);
        break;
      case SenderAction::kExit: {
        if (s.stream != nullptr) {
          const auto [status, got_ack] =
              CloseRolloutStream(&s, /*graceful=*/true);
          if (!status.ok()) {
            RL_LOG_DEBUG("rollout stream closed: {}", Describe(status));
          }
        }
        absl::MutexLock lock(&mu_);
        sender_done_ = true;
        return;
      }
    }
  }
}

ActorClient::SenderAction ActorClient::NextSenderAction(
    SenderState* s, std::optional<Handoff>* handoff,
    std::optional<SegmentWindow::Write>* write) {
  absl::MutexLock lock(&mu_);
  auto has_work = [&]() {
    mu_.AssertReaderHeld();
    if (!handoffs_.empty() || shutting_down_) return true;
    if (s->stream == nullptr) return absl::Now() >= s->reconnect_at;
    return stream_broken_ || window_->NextToWrite().has_value();
  };
  absl::Duration wait = kPollInterval;
  if (s->stream == nullptr) {
    wait = std::clamp(s->reconnect_at - absl::Now(), absl::ZeroDuration(),
                      kPollInterval);
  }
  mu_.AwaitWithTimeout(absl::Condition(&has_work), wait);
  if (s->stream != nullptr &&
      channel_->GetState(/*try_to_connect=*/false) == GRPC_CHANNEL_READY) {
    last_connected_ = absl::Now();
  }
  if (!handoffs_.empty()) {
    *handoff = std::move(handoffs_.front());
    handoffs_.pop_front();
    return SenderAction::kEncode;
  }
  if (shutting_down_) return SenderAction::kExit;
  if (s->stream == nullptr) {
    return absl::Now() >= s->reconnect_at ? SenderAction::kOpen
                                          : SenderAction::kNone;
  }
  if (stream_broken_) return SenderAction::kTeardown;
  if ((*write = window_->NextToWrite())) return SenderAction::kWrite;
  return SenderAction::kNone;
}

void ActorClient::OpenRolloutStream(SenderState* s) {
  static const std::string* const method = new std::string(absl::StrCat(
      "/", LearnerService::service_full_name(), "/StreamRollouts"));
  s->context = std::make_unique<grpc::ClientContext>();
  if (!options_.run_key.empty()) {
    s->context->AddMetadata(kRunKeyMetadata, options_.run_key);
    s->context->AddMetadata(kActorIdMetadata,
                            std::to_string(options_.actor_id));
  }
  s->logged_fallback = false;
  if (options_.shared_memory && !s->shared_failed) {
    absl::StatusOr<std::unique_ptr<SharedSegmentWriter>> shared =
        SharedSegmentWriter::Create({});
    if (shared.ok()) {
      s->shared = *std::move(shared);
      s->context->AddMetadata(kSharedSegmentsMetadata, s->shared->offer());
    } else if (!s->warned_shared) {
      s->warned_shared = true;
      RL_LOG_WARNING(
          "segments go as gRPC bytes even to a learner on this host: {}",
          shared.status().ToString());
    }
  }
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) {
      s->context.reset();
      s->shared.reset();
      return;
    }
    rollout_context_ = s->context.get();
    window_->OnStreamOpened();
    stream_broken_ = false;
    stream_got_ack_ = false;
    stream_shared_ = false;
    ack_reader_done_ = false;
    if (++s->streams_opened > 1) ++counters_.reconnects;
  }
  s->stream = std::make_unique<RawClientStream<RolloutAck>>(channel_, *method,
                                                            s->context.get());
  s->ack_reader = StartThread(
      "actor-acks", [this, stream = s->stream.get(), shared = s->shared.get()] {
        SetThreadName("actor-acks");
        AckReaderLoop(stream, shared);
      });
}

void ActorClient::WriteSegment(SenderState* s,
                               const SegmentWindow::Write& write) {
  const absl::Time write_start = absl::Now();
  bool shared_accepted;
  {
    absl::MutexLock lock(&mu_);
    shared_accepted = stream_shared_;
  }
  // Through shared memory (whether the write went through), or nullopt:
  // as bytes.
  const std::optional<bool> shared_write =
      shared_accepted ? WriteShared(s, write) : std::nullopt;
  const bool shared = shared_write.has_value();
  const bool ok = shared ? *shared_write
                         : s->stream->Write(SerializeAliased(write.segment));
  if (ok && options_.emitter != nullptr) {
    options_.emitter->Emit("actor/segment_send_seconds",
                           write.sequence_number *
                               options_.spec.segment_length() *
                               options_.spec.envs_per_actor(),
                           absl::ToDoubleSeconds(absl::Now() - write_start),
                           {{"actor", std::to_string(options_.actor_id)}});
  }
  absl::MutexLock lock(&mu_);
  if (!ok) {
    stream_broken_ = true;
    return;
  }
  window_->OnWritten(write.sequence_number);
  ++counters_.segments_sent;
  if (shared) ++counters_.segments_shared;
  if (write.resend) ++counters_.segments_resent;
  last_connected_ = absl::Now();
}

std::optional<bool> ActorClient::WriteShared(
    SenderState* s, const SegmentWindow::Write& write) {
  // A resend goes as bytes: the learner may have its copy from the stream
  // before, and ack it (freeing the slot for the next segment) before it
  // reads this stream's reference.
  if (write.resend) return std::nullopt;
  const RolloutSegment& segment = *write.segment;
  const int64_t bytes = static_cast<int64_t>(segment.ByteSizeLong());
  absl::StatusOr<SharedSlotRef> slot =
      s->shared->Write(write.sequence_number, bytes, [&segment](uint8_t* out) {
        segment.SerializeWithCachedSizesToArray(out);
      });
  if (!slot.ok()) {
    // Every slot in flight, or no memory for a larger slot: this one goes
    // as bytes on the same stream, in order.
    if (!s->logged_fallback) {
      s->logged_fallback = true;
      RL_LOG_INFO("segment {} goes as gRPC bytes: {}", write.sequence_number,
                  slot.status().ToString());
    }
    return std::nullopt;
  }
  RolloutSegment envelope;
  envelope.set_run_id(segment.run_id());
  envelope.set_actor_id(segment.actor_id());
  envelope.set_sequence_number(segment.sequence_number());
  envelope.set_actor_incarnation(segment.actor_incarnation());
  envelope.mutable_shared()->set_slot(slot->slot);
  envelope.mutable_shared()->set_length(slot->length);
  // False: the stream broke, and the segment is resent on the next one.
  return s->stream->Write(SerializeCopy(envelope));
}

void ActorClient::TeardownRolloutStream(SenderState* s) {
  const auto [status, got_ack] = CloseRolloutStream(s, /*graceful=*/false);
  if (!s->shared_failed &&
      absl::StrContains(status.error_message(), "shared segments:")) {
    s->shared_failed = true;
    RL_LOG_WARNING(
        "the learner could not read this actor's shared memory ({}): "
        "segments go as gRPC bytes from now on",
        Describe(status));
  }
  if (got_ack) {
    s->backoff.Reset();
    s->failures = 0;
  }
  const absl::Duration delay = s->backoff.Next();
  s->reconnect_at = absl::Now() + delay;
  if (RefusedForGood(status)) {
    // Sending it again would be refused again, for ever, while the run
    // holds its workers at no progress: a worker failure, with the reason,
    // that the coordinator counts against the run.
    absl::MutexLock lock(&mu_);
    sender_error_ = absl::FailedPreconditionError(absl::StrCat(
        "the learner refused a segment for a reason that cannot change: ",
        Describe(status)));
    RL_LOG_ERROR("{}", sender_error_.ToString());
  } else if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
    RL_LOG_ERROR(
        "THE LEARNER REJECTED A SEGMENT (a bug on the actor side): {}; "
        "reconnecting in {}",
        Describe(status), FormatDelay(delay));
  } else {
    LogReconnect("rollout stream to", options_.learner_address, status, delay,
                 ++s->failures);
  }
}

std::pair<grpc::Status, bool> ActorClient::CloseRolloutStream(SenderState* s,
                                                              bool graceful) {
  if (graceful) s->stream->WritesDone();
  {
    absl::MutexLock lock(&mu_);
    auto reader_done = [this]() {
      mu_.AssertReaderHeld();
      return ack_reader_done_;
    };
    if (graceful) {
      mu_.AwaitWithTimeout(absl::Condition(&reader_done), kCloseTimeout);
    }
    if (!ack_reader_done_) s->context->TryCancel();
  }
  s->ack_reader.join();
  grpc::Status status = s->stream->Finish();
  bool got_ack;
  {
    absl::MutexLock lock(&mu_);
    rollout_context_ = nullptr;
    got_ack = stream_got_ack_;
  }
  s->stream.reset();
  s->context.reset();
  s->shared.reset();  // its ack reader is gone
  return {status, got_ack};
}

absl::Status ActorClient::DecodePolicies(const PolicyUpdate& update,
                                         PolicyVersion* out) const {
  const RunSpec& spec = options_.spec;
  const int others = std::max(0, spec.policies_size() - 1);
  if (update.policies_size() != others) {
    return absl::InvalidArgumentError(
        absl::StrCat("policies: ", update.policies_size(),
                     " more policies; the run has ", others));
  }
  const auto decode =
      [&](const ActorCriticConfig& config,
          const google::protobuf::RepeatedPtrField<NamedTensor>& tensors,
          const std::string& field) -> absl::StatusOr<ActorCritic> {
    ASSIGN_OR_RETURN(ActorCritic policy, CreateActorCritic(config));
    RETURN_IF_ERROR(CatchTorchErrors("moving the policy to the actor's device",
                                     [&] { policy->to(device_); }));
    RETURN_IF_ERROR(DecodePolicyTensors(tensors, field, policy));
    return policy;
  };
  ASSIGN_OR_RETURN(out->policy,
                   decode(policy_config_, update.parameters(), "parameters"));
  out->others.clear();
  for (int i = 0; i < others; ++i) {
    const NamedPolicyParameters& named = update.policies(i);
    const std::string field = absl::StrCat("policies[", i, "]");
    if (named.name() != spec.policies(i + 1).name()) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".name: \"", named.name(), "\"; the run's policy ", i + 1,
          " is \"", spec.policies(i + 1).name(), "\""));
    }
    ASSIGN_OR_RETURN(ActorCritic policy,
                     decode(RunNetworkConfig(NamedPolicyRun(spec, i + 1)),
                            named.parameters(), field + ".parameters"));
    out->others.push_back(std::move(policy));
  }
  out->league_pool.clear();
  for (int i = 0; i < update.league_pool_size(); ++i) {
    const LeagueVersionParameters& kept = update.league_pool(i);
    ASSIGN_OR_RETURN(ActorCritic frozen,
                     decode(policy_config_, kept.parameters(),
                            absl::StrCat("league_pool[", i, "].parameters")));
    out->league_pool.emplace_back(kept.version(), std::move(frozen));
  }
  return absl::OkStatus();
}

void ActorClient::PolicyLoop() {
  // Its failures: consecutive streams that ended without an update.
  Backoff backoff = MakeBackoff();
  int64_t streams_opened = 0;
  while (true) {
    grpc::ClientContext context;
    if (!options_.run_key.empty()) {
      context.AddMetadata(kRunKeyMetadata, options_.run_key);
      context.AddMetadata(kActorIdMetadata, std::to_string(options_.actor_id));
    }
    SubscribePolicyRequest request;
    request.set_run_id(run_id_);
    request.set_actor_id(options_.actor_id);
    {
      absl::MutexLock lock(&mu_);
      if (shutting_down_) return;
      policy_context_ = &context;
      // Ask for the learner's current version even if it is not newer: a
      // restarted learner may have resumed from an older checkpoint, and
      // its versions are the ones that count from now on.
      request.set_have_version(0);
      // No league yet: begin it with the versions the learner kept.
      request.set_league_pool(options_.spec.has_league() && !league_started_);
      if (++streams_opened > 1) ++counters_.reconnects;
    }
    const absl::Time opened_at = absl::Now();
    std::unique_ptr<grpc::ClientReader<PolicyUpdate>> reader =
        stub_->SubscribePolicy(&context, request);
    bool got_update = false;
    bool first_of_stream = true;
    bool final_update = false;
    PolicyUpdate update;
    while (reader->Read(&update)) {
      got_update = true;
      int64_t have_version;
      {
        absl::MutexLock lock(&mu_);
        last_connected_ = absl::Now();
        ++counters_.policy_updates_received;
        have_version = counters_.latest_version;
      }
      if (update.final()) {
        final_update = true;
        break;
      }
      // The first update of a stream is the learner's current version, even
      // if lower than ours (learner restart); after it, only newer ones.
      if (!first_of_stream && update.version() <= have_version) continue;
      first_of_stream = false;
      auto published = std::make_shared<PolicyVersion>();
      published->version = update.version();
      published->env_steps = update.env_steps();
      absl::Status status = DecodePolicies(update, published.get());
      if (!status.ok()) {
        RL_LOG_ERROR("policy version {} from the learner does not fit: {}",
                     update.version(), status.ToString());
        continue;
      }
      absl::MutexLock lock(&mu_);
      if (counters_.latest_version == 0) {
        RL_LOG_INFO("received policy version {} ({} env steps)",
                    update.version(), update.env_steps());
      } else {
        RL_LOG_DEBUG("received policy version {} ({} env steps)",
                     update.version(), update.env_steps());
      }
      if (!league_started_ && !published->league_pool.empty()) {
        learner_league_pool_ = std::move(published->league_pool);
      }
      policy_ = std::move(published);
      counters_.latest_version = update.version();
    }
    if (final_update) {
      RL_LOG_INFO("the learner sent its final policy (version {}); stopping",
                  update.version());
      context.TryCancel();
    }
    const grpc::Status status = reader->Finish();
    absl::MutexLock lock(&mu_);
    policy_context_ = nullptr;
    if (final_update) {
      final_received_ = true;
      counters_.final_received = true;
      return;
    }
    if (shutting_down_) return;
    if (got_update || absl::Now() - opened_at > options_.max_backoff) {
      backoff.Reset();
    }
    const absl::Duration delay = backoff.Next();
    LogReconnect("policy stream from", options_.learner_address, status, delay,
                 backoff.failures());
    mu_.AwaitWithTimeout(absl::Condition(&shutting_down_), delay);
  }
}

}  // namespace rl
