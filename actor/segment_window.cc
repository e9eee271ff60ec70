#include "actor/segment_window.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace rl {

absl::StatusOr<std::unique_ptr<SegmentWindow>> SegmentWindow::Create(
    const Options& options) {
  if (options.initial_credits < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "initial_credits: must be >= 1 (got ", options.initial_credits, ")"));
  }
  return std::unique_ptr<SegmentWindow>(new SegmentWindow(options));
}

SegmentWindow::SegmentWindow(const Options& options)
    : options_(options), credits_(options.initial_credits) {}

bool SegmentWindow::HasRoomForNext() const {
  return next_sequence_number() - acked_ <= credits_ + 1;
}

absl::Status SegmentWindow::Add(std::shared_ptr<const RolloutSegment> segment) {
  const int64_t expected = newest_added() + 1;
  if (expected > last_assigned_) {
    return absl::FailedPreconditionError(
        absl::StrCat("segment ", segment->sequence_number(),
                     " added, but every assigned number (up to ",
                     last_assigned_, ") is added already"));
  }
  if (segment->sequence_number() != expected) {
    return absl::FailedPreconditionError(
        absl::StrCat("segment ", segment->sequence_number(),
                     " added out of order (expected ", expected, ")"));
  }
  if (segment->actor_incarnation() != options_.incarnation) {
    return absl::FailedPreconditionError(absl::StrCat(
        "segment ", segment->sequence_number(), " is of incarnation ",
        segment->actor_incarnation(), ", not ", options_.incarnation));
  }
  pending_.push_back(Pending{std::move(segment), /*written_before=*/false});
  return absl::OkStatus();
}

std::optional<SegmentWindow::Write> SegmentWindow::NextToWrite() const {
  // Acks may have overtaken the writes of this stream (the learner acks
  // what it got on an earlier one).
  const int64_t sequence_number = std::max(written_on_stream_, acked_) + 1;
  const int64_t index = sequence_number - acked_ - 1;
  if (index >= static_cast<int64_t>(pending_.size())) return std::nullopt;
  if (sequence_number > acked_ + credits_) return std::nullopt;
  const Pending& pending = pending_[index];
  return Write{sequence_number, pending.segment, pending.written_before};
}

void SegmentWindow::OnWritten(int64_t sequence_number) {
  written_on_stream_ = std::max(written_on_stream_, sequence_number);
  // It may have been acknowledged (and forgotten) while being written.
  const int64_t index = sequence_number - acked_ - 1;
  if (index >= 0 && index < static_cast<int64_t>(pending_.size())) {
    pending_[index].written_before = true;
  }
}

void SegmentWindow::OnStreamOpened() {
  written_on_stream_ = acked_;
  credits_ = options_.initial_credits;
  // Maybe another learner (restarted from an older checkpoint): until its
  // first ack, the policy's version stands for its version.
  learner_version_ = 0;
}

void SegmentWindow::OnAck(const RolloutAck& ack) {
  const int64_t acked = std::min(ack.acked_sequence_number(), newest_added());
  while (acked_ < acked) {
    pending_.pop_front();
    ++acked_;
  }
  credits_ = std::max(0, ack.credits());
  learner_version_ = ack.latest_policy_version();
}

bool SegmentWindow::FreshWhenUsed(int64_t policy_version,
                                  int64_t max_policy_lag,
                                  int num_actors) const {
  const int64_t learner = std::max(learner_version_, policy_version);
  // The learner is past it already: its newer policy is on the way.
  if (learner - policy_version > max_policy_lag) return false;
  const int64_t actors = std::max(1, num_actors);
  if (unacked() < actors) return true;
  return learner + unacked() / actors - policy_version <= max_policy_lag;
}

}  // namespace rl
