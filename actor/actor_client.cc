#include "actor/actor_client.h"

#include <pthread.h>

#include <algorithm>
#include <optional>
#include <random>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "actor/collect_metrics.h"
#include "actor/device_collector.h"
#include "common/grpc_message.h"
#include "common/grpc_status.h"
#include "common/grpc_util.h"
#include "common/logging.h"
#include "common/secrets.h"
#include "common/status.h"
#include "envs/env_registry.h"
#include "policy/compute_device.h"
#include "policy/device_act_check.h"
#include "policy/device_transfer.h"
#include "policy/policy_codec.h"
#include "policy/segment_codec.h"
#include "policy/step_profiler.h"
#include "policy/torch_status.h"
#include "telemetry/client/emitter.h"

namespace rl {
namespace {

int ActorsPerLearner(const Resources& resources) {
  const int learners = std::max(1, resources.num_learners());
  return std::max(1, (resources.num_actors() + learners - 1) / learners);
}

// Segments and policies carry tensors: up to ~100 MB for big runs.
constexpr int kMaxMessageBytes = 256 << 20;
// How often blocked waits wake to check the connection watchdog.
constexpr absl::Duration kPollInterval = absl::Milliseconds(200);
// After WritesDone, how long the sender waits for the learner to end the
// stream before cancelling it.
constexpr absl::Duration kCloseTimeout = absl::Seconds(1);
// How long Run() lets the sender close gracefully before cancelling its call.
constexpr absl::Duration kSenderExitTimeout = absl::Seconds(3);
// How often the step loop logs progress.
constexpr absl::Duration kProgressLogInterval = absl::Seconds(30);

// While the learner stays away, only every this many failed attempts of a
// stream is logged as a warning (the others at debug level).
constexpr int kWarnEveryFailures = 10;

std::string FormatDelay(absl::Duration delay) {
  return absl::FormatDuration(absl::Trunc(delay, absl::Milliseconds(1)));
}

void SetThreadName(const char* name) {
  pthread_setname_np(pthread_self(), name);  // at most 15 characters
}

// A refusal that a resend cannot change: the segment is malformed for the
// run (its shape, its values) or larger than the learner takes. A learner
// serving another run (it is switching runs) is not one of them.
bool RefusedForGood(const grpc::Status& status) {
  if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
    return !absl::StartsWith(status.error_message(), "segment.run_id");
  }
  return status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
         absl::StrContains(status.error_message(), "larger than max");
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

ChannelOptions LearnerChannelOptions(std::shared_ptr<const Security> security) {
  ChannelOptions options;
  options.security = std::move(security);
  options.max_send_message_bytes = kMaxMessageBytes;
  options.max_receive_message_bytes = kMaxMessageBytes;
  return options;
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

absl::StatusOr<std::unique_ptr<ActorClient>> ActorClient::Create(
    const ActorOptions& options) {
  if (options.learner_address.empty()) {
    return absl::InvalidArgumentError("learner address: must not be empty");
  }
  // Specs arrive resolved (runspec/): checked, never filled in again.
  RETURN_IF_ERROR(CheckResolvedEnvSpec(options.spec.env()));
  // Inference on the device, with the built-in envs there too (else they
  // step on the host); its first use in this process checks itself against
  // the CPU.
  ASSIGN_OR_RETURN(
      const torch::Device device,
      ResolveComputeDevice(options.spec.resources().actor_device(),
                           "resources.actor_device", "this actor"));
  if (options.actor_id < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("actor_id: must be >= 0 (got ", options.actor_id, ")"));
  }
  if (options.env_threads < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "env_threads: must be >= 1 (got ", options.env_threads, ")"));
  }
  if (options.max_disconnected <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("max_disconnected: must be positive");
  }
  const uint64_t seed = options.spec.seed() +
                        1000003ull * static_cast<uint64_t>(options.actor_id);
  // Random per process: the learner restarts duplicate detection when a new
  // process takes over this actor_id.
  SegmentWindow::Options window_options;
  window_options.incarnation =
      (static_cast<uint64_t>(std::random_device{}()) << 32) ^
      static_cast<uint64_t>(absl::ToUnixNanos(absl::Now()));
  window_options.initial_credits = options.initial_credits;
  ASSIGN_OR_RETURN(std::unique_ptr<SegmentWindow> window,
                   SegmentWindow::Create(window_options));
  ASSIGN_OR_RETURN(
      std::unique_ptr<SegmentCollector> collector,
      CreateSegmentCollector(options.spec, seed, options.env_threads, device,
                             options.env_plugin_dirs));
  RETURN_IF_ERROR(CheckDeviceActingOnFirstUse(
      collector->NetworkConfig(options.spec), device));
  return std::unique_ptr<ActorClient>(new ActorClient(
      options, device, std::move(collector), std::move(window)));
}

ActorClient::ActorClient(const ActorOptions& options, torch::Device device,
                         std::unique_ptr<SegmentCollector> collector,
                         std::unique_ptr<SegmentWindow> window)
    : options_(options),
      run_id_(options.run_id.empty() ? options.spec.name() : options.run_id),
      env_spec_(collector->env_spec()),
      policy_config_(collector->NetworkConfig(options.spec)),
      device_(device),
      sync_mode_(options.spec.sync_mode() != ASYNC),
      actors_per_learner_(ActorsPerLearner(options.spec.resources())),
      collector_(std::move(collector)),
      channel_(CreateChannel(options.learner_address,
                             LearnerChannelOptions(options.security))),
      stub_(LearnerService::NewStub(channel_)),
      buffers_{collector_->AllocateRollout(), collector_->AllocateRollout()},
      window_(std::move(window)) {}

ActorClient::~ActorClient() {
  {
    absl::MutexLock lock(&mu_);
    stop_requested_ = true;
    shutting_down_ = true;
    if (rollout_context_ != nullptr) rollout_context_->TryCancel();
    if (policy_context_ != nullptr) policy_context_->TryCancel();
  }
  if (sender_thread_.joinable()) sender_thread_.join();
  if (policy_thread_.joinable()) policy_thread_.join();
}

void ActorClient::Stop() {
  absl::MutexLock lock(&mu_);
  stop_requested_ = true;
}

ActorCounters ActorClient::counters() const {
  absl::MutexLock lock(&mu_);
  return counters_;
}

bool ActorClient::AwaitCounters(
    const std::function<bool(const ActorCounters&)>& predicate,
    absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto holds = [&]() {
    mu_.AssertReaderHeld();
    return predicate(counters_);
  };
  return mu_.AwaitWithTimeout(absl::Condition(&holds), timeout);
}

Backoff ActorClient::MakeBackoff() const {
  Backoff::Options options;
  options.initial = options_.initial_backoff;
  options.max = options_.max_backoff;
  return Backoff(options);
}

absl::Status ActorClient::Run() {
  {
    absl::MutexLock lock(&mu_);
    if (run_called_) {
      return absl::FailedPreconditionError("ActorClient::Run called twice");
    }
    run_called_ = true;
    last_connected_ = absl::Now();
  }
  RL_LOG_INFO(
      "actor {} of run \"{}\": {} x {} steps of {} per segment, {} mode",
      options_.actor_id, run_id_, options_.spec.envs_per_actor(),
      options_.spec.segment_length(), env_spec_.id(),
      sync_mode_ ? "sync" : "async");
  sender_thread_ = StartThread("actor-send", [this] {
    SetThreadName("actor-send");
    SenderLoop();
  });
  policy_thread_ = StartThread("actor-policy", [this] {
    SetThreadName("actor-policy");
    PolicyLoop();
  });

  const absl::Status status = StepLoop();
  bool final_received;
  {
    absl::MutexLock lock(&mu_);
    final_received = final_received_;
  }
  // After the final policy the run is over and nobody needs the queue.
  if (status.ok() && !final_received) Flush();

  {
    absl::MutexLock lock(&mu_);
    shutting_down_ = true;
    if (policy_context_ != nullptr) policy_context_->TryCancel();
    auto sender_done = [this]() {
      mu_.AssertReaderHeld();
      return sender_done_;
    };
    if (!mu_.AwaitWithTimeout(absl::Condition(&sender_done),
                              kSenderExitTimeout) &&
        rollout_context_ != nullptr) {
      rollout_context_->TryCancel();
    }
  }
  sender_thread_.join();
  policy_thread_.join();
  const ActorCounters c = counters();
  uint64_t incarnation;
  {
    absl::MutexLock lock(&mu_);
    incarnation = window_->incarnation();
  }
  // The chaos suite reads "[process P]" and "acknowledged up to segment N"
  // (segment_ledger.h: ParseActorAcknowledgements): keep them as they are.
  RL_LOG_INFO(
      "actor {} of run {} stopped ({}) [process {:x}]: {} segments "
      "collected, {} sent ({} resent), acknowledged up to segment {}, {} "
      "reconnects, {} policy updates, latest version {}",
      options_.actor_id, run_id_,
      status.ok() ? (c.final_received ? "final policy" : "stop requested")
                  : status.ToString(),
      incarnation, c.segments_collected, c.segments_sent, c.segments_resent,
      c.segments_acked, c.reconnects, c.policy_updates_received,
      c.latest_version);
  return status;
}

absl::Status ActorClient::CheckConnected() {
  const absl::Time now = absl::Now();
  if (channel_->GetState(/*try_to_connect=*/true) == GRPC_CHANNEL_READY) {
    last_connected_ = now;
    return absl::OkStatus();
  }
  if (now - last_connected_ > options_.max_disconnected) {
    return absl::UnavailableError(absl::StrCat(
        "no connection to the learner at ", options_.learner_address, " for ",
        absl::FormatDuration(
            absl::Trunc(now - last_connected_, absl::Milliseconds(100))),
        " (limit ", absl::FormatDuration(options_.max_disconnected), ")"));
  }
  return absl::OkStatus();
}

template <typename Ready>
absl::StatusOr<bool> ActorClient::AwaitForStepLoop(const Ready& ready) {
  auto wake = [&]() {
    mu_.AssertReaderHeld();
    return stop_requested_ || final_received_ || !sender_error_.ok() || ready();
  };
  while (true) {
    mu_.AwaitWithTimeout(absl::Condition(&wake), kPollInterval);
    if (!sender_error_.ok()) return sender_error_;
    if (stop_requested_ || final_received_) return false;
    if (ready()) return true;
    RETURN_IF_ERROR(CheckConnected());
  }
}

absl::Status ActorClient::StepLoop() {
  int64_t collected_with = 0;  // policy version of the last segment
  absl::Time last_log = absl::Now();
  // Errors writing the trace are logged, never the run's.
  StepProfiler profiler(options_.profile_path.empty()
                            ? absl::StrCat("profile-", run_id_, "-actor",
                                           options_.actor_id, ".json")
                            : options_.profile_path,
                        options_.profile_segments, device_.is_cuda());
  while (true) {
    std::shared_ptr<const PolicyVersion> policy;
    int buffer = 0;
    int64_t sequence_number = 0;
    {
      absl::MutexLock lock(&mu_);
      sequence_number = window_->next_sequence_number();
      buffer = static_cast<int>(sequence_number % 2);
      auto ready = [&]() {
        mu_.AssertReaderHeld();
        return policy_ != nullptr &&
               (!sync_mode_ || policy_->version != collected_with) &&
               (sync_mode_ ||
                window_->FreshWhenUsed(policy_->version,
                                       options_.spec.max_policy_lag(),
                                       actors_per_learner_)) &&
               window_->HasRoomForNext() && free_[buffer];
      };
      if (sync_mode_) counters_.waiting_for_newer_than = collected_with;
      absl::StatusOr<bool> go = AwaitForStepLoop(ready);
      counters_.waiting_for_newer_than = 0;
      if (!go.ok()) return go.status();
      if (!*go) return absl::OkStatus();
      policy = policy_;
      free_[buffer] = false;
    }

    ActorCritic net = policy->policy;
    if (const absl::Status traced = profiler.BeforeStep(); !traced.ok()) {
      RL_LOG_ERROR("profile: {}", std::string(traced.message()));
    }
    CollectTimings timings;
    const absl::Time collect_start = absl::Now();
    const absl::Status status =
        collector_->Collect(net, &buffers_[buffer], &timings);

    absl::MutexLock lock(&mu_);
    if (!status.ok()) {
      free_[buffer] = true;
      return status;
    }
    ++counters_.segments_collected;
    if (final_received_) {
      free_[buffer] = true;  // the run is over; nobody needs it
      return absl::OkStatus();
    }
    window_->AssignNext();
    collected_with = policy->version;
    if (Emitter* e = options_.emitter) {
      const double seconds = absl::ToDoubleSeconds(absl::Now() - collect_start);
      const int64_t steps =
          static_cast<int64_t>(options_.spec.segment_length()) *
          options_.spec.envs_per_actor();
      metrics_step_ =
          CollectMetricsStep(metrics_step_, policy->env_steps, steps);
      EmitCollectMetrics(e, metrics_step_, steps, seconds, timings,
                         collector_->episode_returns(),
                         collector_->episode_lengths(),
                         {{"actor", std::to_string(options_.actor_id)}});
    }
    handoffs_.push_back(Handoff{buffer, sequence_number, policy->version,
                                collector_->episode_returns(),
                                collector_->episode_lengths()});
    if (absl::Now() - last_log >= kProgressLogInterval) {
      last_log = absl::Now();
      RL_LOG_INFO(
          "{} segments collected, {} acknowledged, policy version {}, {} "
          "reconnects",
          counters_.segments_collected, counters_.segments_acked,
          counters_.latest_version, counters_.reconnects);
    }
  }
}

void ActorClient::Flush() {
  absl::MutexLock lock(&mu_);
  auto flushed = [this]() {
    mu_.AssertReaderHeld();
    // Counted from the assigned numbers, not the added segments: one being
    // encoded is neither in handoffs_ nor in the window yet.
    return window_->AllAcked() || !sender_error_.ok();
  };
  if (!mu_.AwaitWithTimeout(absl::Condition(&flushed),
                            options_.flush_timeout)) {
    RL_LOG_WARNING(
        "stopping with {} segments not acknowledged by the learner after {}",
        window_->unacked(), FormatDelay(options_.flush_timeout));
  }
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
        return HostRollout(buffers_[handoff.buffer], &staging_[handoff.buffer]);
      });
  const absl::Status status =
      host.ok() ? EncodeSegment(*host, segment.get()) : host.status();
  segment->mutable_episode_returns()->Add(handoff.episode_returns.begin(),
                                          handoff.episode_returns.end());
  segment->mutable_episode_lengths()->Add(handoff.episode_lengths.begin(),
                                          handoff.episode_lengths.end());
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

void ActorClient::AckReaderLoop(RawClientStream<RolloutAck>* stream) {
  RolloutAck ack;
  while (stream->Read(&ack)) {
    absl::MutexLock lock(&mu_);
    stream_got_ack_ = true;
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
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) {
      s->context.reset();
      return;
    }
    rollout_context_ = s->context.get();
    window_->OnStreamOpened();
    stream_broken_ = false;
    stream_got_ack_ = false;
    ack_reader_done_ = false;
    if (++s->streams_opened > 1) ++counters_.reconnects;
  }
  s->stream = std::make_unique<RawClientStream<RolloutAck>>(channel_, *method,
                                                            s->context.get());
  s->ack_reader = StartThread("actor-acks", [this, stream = s->stream.get()] {
    SetThreadName("actor-acks");
    AckReaderLoop(stream);
  });
}

void ActorClient::WriteSegment(SenderState* s,
                               const SegmentWindow::Write& write) {
  const absl::Time write_start = absl::Now();
  const bool ok = s->stream->Write(SerializeAliased(write.segment));
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
  if (write.resend) ++counters_.segments_resent;
  last_connected_ = absl::Now();
}

void ActorClient::TeardownRolloutStream(SenderState* s) {
  const auto [status, got_ack] = CloseRolloutStream(s, /*graceful=*/false);
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
  return {status, got_ack};
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
      absl::StatusOr<ActorCritic> policy = CreateActorCritic(policy_config_);
      absl::Status status = policy.status();
      if (policy.ok()) {
        published->policy = *std::move(policy);
        status = CatchTorchErrors("moving the policy to the actor's device",
                                  [&] { published->policy->to(device_); });
        if (status.ok()) status = DecodePolicy(update, published->policy);
      }
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
