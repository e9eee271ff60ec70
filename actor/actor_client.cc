// ActorClient's lifecycle and its step loop: creation, Run() and its
// threads' start and join, the connection watchdog, collecting segments and
// handing them to the sender, and the final flush. The threads that talk to
// the learner (StreamRollouts, SubscribePolicy) are in learner_link.cc.
#include "actor/actor_client.h"

#include <pthread.h>

#include <algorithm>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "actor/actor_client_internal.h"
#include "actor/collect_metrics.h"
#include "actor/device_collector.h"
#include "common/grpc_util.h"
#include "common/logging.h"
#include "common/status.h"
#include "envs/env_registry.h"
#include "policy/compute_device.h"
#include "policy/device_act_check.h"
#include "policy/step_profiler.h"
#include "runspec/named_policies.h"
#include "telemetry/client/emitter.h"

namespace rl {

namespace actor_client_internal {

std::string FormatDelay(absl::Duration delay) {
  return absl::FormatDuration(absl::Trunc(delay, absl::Milliseconds(1)));
}

void SetThreadName(const char* name) {
  pthread_setname_np(pthread_self(), name);  // at most 15 characters
}

}  // namespace actor_client_internal

namespace {

using actor_client_internal::FormatDelay;
using actor_client_internal::kPollInterval;
using actor_client_internal::SetThreadName;

int ActorsPerLearner(const Resources& resources) {
  const int learners = std::max(1, resources.num_learners());
  return std::max(1, (resources.num_actors() + learners - 1) / learners);
}

// Segments and policies carry tensors: up to ~100 MB for big runs.
constexpr int kMaxMessageBytes = 256 << 20;
// How long Run() lets the sender close gracefully before cancelling its call.
constexpr absl::Duration kSenderExitTimeout = absl::Seconds(3);
// How often the step loop logs progress.
constexpr absl::Duration kProgressLogInterval = absl::Seconds(30);

ChannelOptions LearnerChannelOptions(std::shared_ptr<const Security> security) {
  ChannelOptions options;
  options.security = std::move(security);
  options.max_send_message_bytes = kMaxMessageBytes;
  options.max_receive_message_bytes = kMaxMessageBytes;
  return options;
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
  for (int i = 0; i < std::max(1, options.spec.policies_size()); ++i) {
    RETURN_IF_ERROR(CheckDeviceActingOnFirstUse(
        RunNetworkConfig(PolicyRun(options.spec, i)), device));
  }
  return std::unique_ptr<ActorClient>(new ActorClient(
      options, seed, device, std::move(collector), std::move(window)));
}

ActorClient::ActorClient(const ActorOptions& options, uint64_t seed,
                         torch::Device device,
                         std::unique_ptr<SegmentCollector> collector,
                         std::unique_ptr<SegmentWindow> window)
    : options_(options),
      seed_(seed),
      run_id_(options.run_id.empty() ? options.spec.name() : options.run_id),
      env_spec_(collector->env_spec()),
      policy_config_(RunNetworkConfig(PolicyRun(options.spec, 0))),
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
    absl::Status prepared = absl::OkStatus();
    if (options_.spec.has_league()) {
      prepared = AdvanceLeague(*policy, net);
    } else if (options_.spec.policies_size() > 0 &&
               policy != row_policies_of_) {
      prepared = SetRowPolicies(policy);
    }
    if (!prepared.ok()) {
      absl::MutexLock lock(&mu_);
      free_[buffer] = true;
      return prepared;
    }
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
    // A league's segment carries the trained seats' rows and episodes.
    Handoff handoff{buffer, sequence_number, policy->version,
                    collector_->episode_returns(),
                    collector_->episode_lengths()};
    if (league_ != nullptr) {
      handoff.episode_returns = league_->TakeLearnerReturns();
      handoff.episode_lengths = league_->TakeLearnerLengths();
      handoff.rows = league_->learner_rows();
      handoff.matches = league_->TakeMatches();
    }
    if (options_.spec.policies_size() > 0) {
      handoff.episode_rows = collector_->episode_rows();
    }
    EmitSegment(handoff, policy->env_steps,
                absl::ToDoubleSeconds(absl::Now() - collect_start), timings);
    handoffs_.push_back(std::move(handoff));
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

absl::Status ActorClient::AdvanceLeague(const PolicyVersion& policy,
                                        ActorCritic& net) {
  const int64_t updates = std::max<int64_t>(0, policy.version - 1);
  const int64_t due = updates / options_.spec.league().snapshot_interval();
  if (league_ != nullptr && due < league_->next_version() - 1) {
    // The learner went back (it resumed from an older checkpoint): the
    // frozen versions past it are of updates it discarded, under numbers
    // the run makes again. Begin the league afresh from this policy.
    RL_LOG_WARNING(
        "actor {} of run {}: policy version {} is older than the league's "
        "newest frozen version {} (the learner resumed from an earlier "
        "checkpoint); the league begins again from it",
        options_.actor_id, run_id_, policy.version,
        league_->next_version() - 1);
  } else if (league_ != nullptr) {
    return league_->AfterUpdate(updates, policy.env_steps, net);
  }
  // The actor's own seed, as its envs': the actors' opponents differ.
  ASSIGN_OR_RETURN(
      std::unique_ptr<League> league,
      League::Create(options_.spec, net, options_.spec.envs_per_actor(),
                     updates, seed_));
  // The versions the learner kept (an actor that starts again, or joins a
  // run under way), before its own first; not after the learner went back.
  std::vector<std::pair<int64_t, ActorCritic>> kept;
  {
    absl::MutexLock lock(&mu_);
    if (!league_started_) kept.swap(learner_league_pool_);
    learner_league_pool_.clear();
    league_started_ = true;
  }
  ASSIGN_OR_RETURN(const int64_t adopted, league->AdoptEarlier(kept));
  // Its games are counted from the run's env steps now (freezes nothing).
  RETURN_IF_ERROR(league->AfterUpdate(updates, policy.env_steps, net));
  RETURN_IF_ERROR(collector_->SetOpponents(league.get()));
  league_ = std::move(league);
  RL_LOG_INFO(
      "actor {} of run {}: league of frozen versions from policy version {} "
      "(league version {}, {} earlier versions from the learner; {}; a "
      "version every {} updates, at most {}); segments carry the {} trained "
      "seats' rows",
      options_.actor_id, run_id_, policy.version, league_->next_version() - 1,
      adopted, league_->Describe(), options_.spec.league().snapshot_interval(),
      options_.spec.league().pool_size(), league_->learner_rows().size(0));
  return absl::OkStatus();
}

absl::Status ActorClient::SetRowPolicies(
    const std::shared_ptr<const PolicyVersion>& version) {
  const PolicyVersion& policy = *version;
  const RunSpec& spec = options_.spec;
  if (static_cast<int>(policy.others.size()) + 1 != spec.policies_size()) {
    return absl::InternalError(absl::StrCat(
        "policy version ", policy.version, " holds ", policy.others.size() + 1,
        " policies; the run has ", spec.policies_size()));
  }
  std::vector<RowPolicy> acting;
  for (int i = 0; i < spec.policies_size(); ++i) {
    acting.push_back(
        RowPolicy{i == 0 ? policy.policy : policy.others[i - 1],
                  torch::tensor(RowsOfPolicy(spec, i, spec.envs_per_actor()),
                                torch::kInt64)});
  }
  RETURN_IF_ERROR(collector_->SetRowPolicies(std::move(acting)));
  if (row_policies_of_ == nullptr) {
    RL_LOG_INFO("actor {} of run {}: {} policies act, each for its agents",
                options_.actor_id, run_id_, spec.policies_size());
  }
  row_policies_of_ = version;
  return absl::OkStatus();
}

void ActorClient::EmitSegment(const Handoff& handoff, int64_t env_steps,
                              double seconds, const CollectTimings& timings) {
  Emitter* e = options_.emitter;
  if (e == nullptr) return;
  const RunSpec& spec = options_.spec;
  const int64_t steps =
      static_cast<int64_t>(spec.segment_length()) * spec.envs_per_actor();
  metrics_step_ = CollectMetricsStep(metrics_step_, env_steps, steps);
  const std::string actor = std::to_string(options_.actor_id);
  if (spec.policies_size() == 0) {
    EmitCollectMetrics(e, metrics_step_, steps, seconds, timings,
                       handoff.episode_returns, handoff.episode_lengths,
                       {{"actor", actor}});
    return;
  }
  // The segment's rates and times once; each policy's episodes apart.
  EmitCollectMetrics(e, metrics_step_, steps, seconds, timings, {}, {},
                     {{"actor", actor}});
  const std::vector<PolicyEpisodes> episodes =
      EpisodesByPolicy(spec, handoff.episode_rows, handoff.episode_returns,
                       handoff.episode_lengths);
  for (int i = 0; i < spec.policies_size(); ++i) {
    EmitEpisodeMetrics(e, metrics_step_, episodes[i].returns,
                       episodes[i].lengths,
                       {{"actor", actor}, {"policy", spec.policies(i).name()}});
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

}  // namespace rl
