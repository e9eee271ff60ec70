#include "learner/segment_intake.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log_limiter.h"
#include "common/logging.h"
#include "common/status.h"

namespace rl {

void IntakeSegment::GiveBudget() {
  if (budget != nullptr) budget->Give(budget_bytes);
  budget = nullptr;
}

SegmentIntake::SegmentIntake(SegmentIntakeOptions options)
    : options_(std::move(options)) {}

int64_t SegmentIntake::OpenStream(int actor_id, AckCallback on_ack) {
  absl::MutexLock lock(&mu_);
  const int64_t id = ++next_stream_id_;
  streams_[id] = Stream{actor_id, std::move(on_ack)};
  actor_stream_[actor_id] = id;
  counts_.connected_actors = static_cast<int>(actor_stream_.size());
  return id;
}

void SegmentIntake::CloseStream(int64_t stream_id) {
  absl::MutexLock lock(&mu_);
  auto it = streams_.find(stream_id);
  if (it == streams_.end()) return;
  const int actor = it->second.actor_id;
  streams_.erase(it);
  auto a = actor_stream_.find(actor);
  if (a != actor_stream_.end() && a->second == stream_id) {
    // The actor's acks go back to its newest stream still open, if any: a
    // stream refused at its first segment (a replaced process that keeps
    // reconnecting under the same actor id) took the route on opening, and
    // must not leave the live stream without acks when it ends.
    int64_t newest = 0;
    for (const auto& [id, stream] : streams_) {
      if (stream.actor_id == actor) newest = std::max(newest, id);
    }
    if (newest != 0) {
      a->second = newest;
    } else {
      actor_stream_.erase(a);
    }
  }
  counts_.connected_actors = static_cast<int>(actor_stream_.size());
}

absl::Status SegmentIntake::Reject(absl::Status status) {
  absl::MutexLock lock(&mu_);
  ++counts_.rejected;
  return status;
}

void SegmentIntake::SetPolicyVersion(int64_t version) {
  absl::MutexLock lock(&mu_);
  policy_version_ = version;
}

absl::Status SegmentIntake::CheckHeader(const RolloutSegment& segment,
                                        int stream_actor) {
  if (!options_.run_id.empty() && !segment.run_id().empty() &&
      segment.run_id() != options_.run_id) {
    return absl::InvalidArgumentError(
        absl::StrCat("segment.run_id: this learner serves \"", options_.run_id,
                     "\" (got \"", segment.run_id(), "\")"));
  }
  if (segment.sequence_number() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("segment.sequence_number: must be >= 1 (got ",
                     segment.sequence_number(), ")"));
  }
  if (segment.policy_version() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("segment.policy_version: must be >= 1 (got ",
                     segment.policy_version(), ")"));
  }
  if (segment.actor_id() != stream_actor) {
    return absl::InvalidArgumentError(absl::StrCat(
        "segment.actor_id: a stream carries one actor's segments (opened by ",
        stream_actor, ", got ", segment.actor_id(), ")"));
  }
  return absl::OkStatus();
}

absl::Status SegmentIntake::Submit(int64_t stream_id,
                                   std::unique_ptr<RolloutSegment> segment) {
  int actor_id;
  {
    absl::MutexLock lock(&mu_);
    auto it = streams_.find(stream_id);
    if (it == streams_.end()) {
      return absl::FailedPreconditionError("stream is closed");
    }
    actor_id = it->second.actor_id;
  }
  if (absl::Status header = CheckHeader(*segment, actor_id); !header.ok()) {
    return Reject(std::move(header));
  }
  {
    absl::MutexLock lock(&mu_);
    ActorState& actor = actors_[actor_id];
    if (!actor.streamed_here) {
      actor.streamed_here = true;
      if (++streamed_here_ == options_.actors_here + 1) {
        // Said once: more actors than the run declares make updates wait
        // for none of them (SYNC) or drop their segments as stale (ASYNC).
        RL_LOG_WARNING(
            "run {}: actor {} is the {}th actor to stream to this learner, "
            "which expects {} (resources.num_actors: {} over {} learner(s)); "
            "segments beyond what the run declares are dropped as stale: "
            "set resources.num_actors to the actors you start",
            options_.run_id, actor_id, streamed_here_, options_.actors_here,
            options_.num_actors, options_.num_learners);
      }
    }
  }
  absl::StatusOr<DecodedSegment> decoded = options_.decode(*segment);
  if (!decoded.ok()) return Reject(decoded.status());
  const int64_t bytes = static_cast<int64_t>(segment->ByteSizeLong());

  absl::MutexLock lock(&mu_);
  ++counts_.received;
  ActorState& actor = actors_[actor_id];
  const uint64_t incarnation = segment->actor_incarnation();
  if (std::find(actor.replaced.begin(), actor.replaced.end(), incarnation) !=
      actor.replaced.end()) {
    // A process this actor id moved on from streams again: two processes
    // stream as one actor (a stale one, or an impostor). Taking it back
    // would restart the numbering of both, and neither would be
    // acknowledged again: the newer keeps the id.
    ++counts_.rejected;
    const absl::Status refused = absl::FailedPreconditionError(
        absl::StrCat("actor ", actor_id, ": process ", incarnation,
                     " was replaced by process ", actor.incarnation,
                     " under this actor id; only the newest streams as it"));
    static LogLimiter* const limiter = new LogLimiter();
    std::string left_out;
    if (limiter->Allow(absl::StrCat(options_.run_id, "/", actor_id),
                       &left_out)) {
      RL_LOG_WARNING("run {}: {}{}", options_.run_id,
                     std::string(refused.message()), left_out);
    }
    return refused;
  }
  if (!actor.known || actor.incarnation != incarnation) {
    // A new actor process under this id: its numbering starts afresh.
    if (actor.known) {
      RL_LOG_INFO("run {}: actor {} is now process {} (was {})",
                  options_.run_id, actor_id, incarnation, actor.incarnation);
      actor.replaced.push_back(actor.incarnation);
      if (actor.replaced.size() > kMaxReplacedIncarnations) {
        actor.replaced.pop_front();
      }
    }
    actor.known = true;
    actor.incarnation = incarnation;
    actor.last_sequence = 0;
    actor.acked = 0;
  }
  if (segment->sequence_number() <= actor.last_sequence) {
    // Resent after a reconnect: already queued or processed.
    ++counts_.duplicate;
    if (segment->sequence_number() <= actor.acked) SendAck(actor_id);
    return absl::OkStatus();
  }
  if (queue_.size() >= options_.queue_capacity) {
    return absl::ResourceExhaustedError(
        absl::StrCat("segment queue full: actor ", actor_id, " exceeded its ",
                     options_.credits, " credits"));
  }
  // The run is over (or failed): no PPO thread would take it, and it
  // would hold its share of the segment budget until the intake goes.
  if (closed_) return absl::OkStatus();
  auto queued = std::make_unique<IntakeSegment>();
  if (options_.budget != nullptr) {
    RETURN_IF_ERROR(options_.budget->Take(bytes));
    queued->budget = options_.budget;
    queued->budget_bytes = bytes;
  }
  actor.last_sequence = segment->sequence_number();
  queued->actor_id = actor_id;
  queued->incarnation = incarnation;
  queued->sequence_number = segment->sequence_number();
  queued->policy_version = segment->policy_version();
  queued->env_steps = decoded->env_steps;
  queued->payload = std::move(decoded->payload);
  queued->proto = std::move(segment);
  queue_.push_back(std::move(queued));
  counts_.queued = static_cast<int64_t>(queue_.size());
  return absl::OkStatus();
}

bool SegmentIntake::StageNext(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return closed_ || !queue_.empty();
  };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  if (!queue_.empty()) {
    std::unique_ptr<IntakeSegment> next = std::move(queue_.front());
    queue_.pop_front();
    counts_.queued = static_cast<int64_t>(queue_.size());
    next->GiveBudget();
    const int64_t lag = policy_version_ - next->policy_version;
    const int64_t max_lag = options_.async ? options_.max_policy_lag : 0;
    // A version from the future comes from before a learner restart (the
    // checkpoint is older than the actor's policy): as unusable as a stale
    // one.
    if (lag > max_lag || lag < 0) {
      ++counts_.dropped_stale;
      ++actors_[next->actor_id].dropped_stale;
      if (options_.on_stale) options_.on_stale(next->key());
      MarkAcked(*next);
      SendAck(next->actor_id);
    } else {
      staged_steps_ += next->env_steps;
      staged_.push_back(std::move(next));
    }
  }
  return BatchComplete();
}

bool SegmentIntake::BatchComplete() const {
  if (staged_.empty()) return false;
  if (staged_steps_ >= options_.batch_steps) return true;
  if (options_.async) return false;
  // SYNC: every connected actor has contributed (the others wait for us).
  std::set<int> contributed;
  for (const auto& s : staged_) contributed.insert(s->actor_id);
  for (const auto& [actor, stream] : actor_stream_) {
    if (contributed.count(actor) == 0) return false;
  }
  return true;
}

SegmentBatch SegmentIntake::TakeBatch() {
  absl::MutexLock lock(&mu_);
  SegmentBatch batch;
  batch.swap(staged_);
  staged_steps_ = 0;
  return batch;
}

void SegmentIntake::AcknowledgeUsed(const SegmentBatch& batch) {
  absl::MutexLock lock(&mu_);
  std::set<int> actors;
  for (const auto& s : batch) {
    MarkAcked(*s);
    actors.insert(s->actor_id);
  }
  for (int actor : actors) SendAck(actor);
}

void SegmentIntake::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
  queue_.clear();
  staged_.clear();
  staged_steps_ = 0;
  counts_.queued = 0;
}

void SegmentIntake::SendAck(int actor_id) {
  auto s = actor_stream_.find(actor_id);
  if (s == actor_stream_.end()) return;
  const ActorState& actor = actors_[actor_id];
  RolloutAck ack;
  ack.set_acked_sequence_number(actor.acked);
  ack.set_credits(options_.credits);
  ack.set_dropped_stale(actor.dropped_stale);
  ack.set_latest_policy_version(policy_version_);
  streams_[s->second].on_ack(ack);
}

void SegmentIntake::MarkAcked(const IntakeSegment& s) {
  ActorState& actor = actors_[s.actor_id];
  if (actor.incarnation != s.incarnation) return;
  actor.acked = std::max(actor.acked, s.sequence_number);
}

std::vector<AckWatermark> SegmentIntake::Watermarks(
    bool streamed_here_only) const {
  absl::MutexLock lock(&mu_);
  std::vector<AckWatermark> out;
  for (const auto& [id, actor] : actors_) {
    if (!actor.known || (streamed_here_only && !actor.streamed_here)) continue;
    AckWatermark w;
    w.set_actor_id(id);
    w.set_incarnation(actor.incarnation);
    w.set_sequence_number(actor.acked);
    out.push_back(w);
  }
  return out;
}

void SegmentIntake::RestoreWatermarks(
    const std::vector<AckWatermark>& watermarks) {
  absl::MutexLock lock(&mu_);
  for (const AckWatermark& w : watermarks) {
    ActorState& actor = actors_[w.actor_id()];
    actor.known = true;
    actor.incarnation = w.incarnation();
    actor.last_sequence = w.sequence_number();
    actor.acked = w.sequence_number();
  }
}

IntakeCounts SegmentIntake::counts() const {
  absl::MutexLock lock(&mu_);
  return counts_;
}

}  // namespace rl
