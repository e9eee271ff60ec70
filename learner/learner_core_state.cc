#include "learner/learner_core_impl.h"

// LearnerCore's checkpoints and its start state: what it writes, and what it
// resumes or starts from.

#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"
#include "learner/gang_sync.h"
#include "learner/training_state.h"

namespace rl {

absl::Status LearnerCore::Impl::GatherAckedSegments() {
  ASSIGN_OR_RETURN(
      std::vector<AckWatermark> all,
      GatherWatermarks(*options_.collective, intake_->Watermarks(true)));
  if (rank_ == 0) {
    absl::MutexLock lock(&mu_);
    gathered_ = MergeWatermarks(gathered_, all, {});
  }
  return absl::OkStatus();
}

void LearnerCore::Impl::OpenLedger() {
  std::error_code error;
  std::filesystem::create_directories(options_.run_dir, error);
  absl::StatusOr<SegmentLedger> ledger =
      SegmentLedger::Open(SegmentLedgerPath(options_.run_dir, rank_));
  if (!ledger.ok()) {
    RL_LOG_WARNING("no segment ledger: {}", ledger.status().ToString());
    return;
  }
  ledger_.emplace(*std::move(ledger));
  ledger_->Resume(GetStatus().updates());
}

absl::Status LearnerCore::Impl::Checkpoint(WriteFn write) {
  if (rank_ != 0 || !checkpoints_.enabled()) return absl::OkStatus();
  const LearnerStatus status = GetStatus();
  const absl::Status written =
      (checkpoints_.*write)(status.updates(), status.env_steps(), policy_,
                            updater_->optimizer(), StateTensors());
  // The other policies' checkpoints are kept for the run's own: those
  // whose run checkpoint failed or was pruned go now.
  if (!others_.empty()) {
    const absl::Status pruned = others_.Prune(options_.run_dir);
    if (!pruned.ok()) {
      RL_LOG_WARNING("pruning the policies' checkpoints: {}",
                     pruned.ToString());
    }
  }
  return written;
}

TensorMap LearnerCore::Impl::StateTensors() {
  TrainingState state;
  // Which segments the updates so far used: per actor process, the
  // highest sequence number acknowledged. A learner resumed here counts
  // an actor's resend of one of them as a duplicate (its ack may have
  // been lost with the old learner) instead of using it twice. Actors of
  // other ranks: as gathered at this checkpoint (rank 0 writes the
  // gang's); this rank's own: as they are now.
  const std::vector<AckWatermark> known = intake_->Watermarks(false);
  const std::vector<AckWatermark> here = intake_->Watermarks(true);
  {
    absl::MutexLock lock(&mu_);
    progress_.Save(&state);
    for (const AckWatermark& w : MergeWatermarks(known, gathered_, here)) {
      *state.add_acked_segments() = w;
    }
    state.set_nonfinite_updates(faults_.nonfinite_updates);
  }
  state.set_consecutive_nonfinite_updates(
      updater_->consecutive_nonfinite_updates());
  state.set_updater_generator(GeneratorStateBytes(updater_->generator()));
  if (options_.spec.has_league()) {
    // The versions an actor that starts again is sent: a resumed learner
    // keeps sending them.
    LeaguePoolState* pool = state.mutable_league_pool();
    pool->set_snapshot_interval(options_.spec.league().snapshot_interval());
    for (LeagueVersionParameters& version : publisher_.KeptLeagueVersions()) {
      *pool->add_versions() = std::move(version);
    }
  }
  TensorMap extra;
  PutTrainingState(state, &extra);
  return extra;
}

std::pair<int64_t, int64_t> LearnerCore::Impl::VersionAndSteps() const {
  absl::MutexLock lock(&mu_);
  return {progress_.policy_version(), progress_.env_steps()};
}

absl::Status LearnerCore::Impl::LoadStartState() {
  if (checkpoints_.enabled() && checkpoints_.Latest().ok()) {
    // The newest that reads: one a crash damaged is passed over.
    absl::StatusOr<std::string> read = ReadNewestReadable(
        checkpoints_.root(), [&](const std::string& dir) -> absl::Status {
          TensorMap extra;
          RETURN_IF_ERROR(
              ReadCheckpoint(dir, policy_, &updater_->optimizer(), &extra));
          RETURN_IF_ERROR(others_.Read(dir));
          return ApplyState(extra, absl::StrCat("checkpoint ", dir));
        });
    if (!read.ok()) return read.status();
    const auto [version, steps] = VersionAndSteps();
    RL_LOG_INFO("resumed from {} at version {}, {} env steps", *read, version,
                steps);
    return absl::OkStatus();
  }
  if (options_.start_from.empty()) return absl::OkStatus();
  return StartFrom(options_.start_from);
}

absl::Status LearnerCore::Impl::StartFrom(const std::string& dir) {
  const std::string root = dir + "/checkpoints";
  absl::StatusOr<std::string> latest = LatestCheckpoint(root);
  if (!latest.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("start_from: no complete checkpoint under ", root,
                     " to start from (", latest.status().message(), ")"));
  }
  TensorMap extra;
  RETURN_IF_ERROR(
      ReadCheckpoint(*latest, policy_, &updater_->optimizer(), &extra));
  RETURN_IF_ERROR(others_.Read(*latest));
  RETURN_IF_ERROR(ApplyState(extra, absl::StrCat("checkpoint ", *latest),
                             /*own_run=*/false));
  const auto [version, steps] = VersionAndSteps();
  RL_LOG_INFO("started from {} at version {}, {} env steps", *latest, version,
              steps);
  return absl::OkStatus();
}

absl::Status LearnerCore::Impl::ApplyState(const TensorMap& extra,
                                           const std::string& source,
                                           bool own_run) {
  ASSIGN_OR_RETURN(TrainingState state, TakeTrainingState(extra, source));
  RETURN_IF_ERROR(SetGeneratorState(state.updater_generator(),
                                    updater_->generator(), source));
  if (own_run) {
    intake_->RestoreWatermarks(
        {state.acked_segments().begin(), state.acked_segments().end()});
    // The run's own streak of skipped updates goes on (another run's, a
    // start_from, is not this run's: a round starts with none).
    updater_->set_consecutive_nonfinite_updates(
        static_cast<int>(state.consecutive_nonfinite_updates()));
  }
  intake_->SetPolicyVersion(state.policy_version());
  if (own_run && options_.spec.has_league()) {
    RETURN_IF_ERROR(RestoreLeaguePool(state.mutable_league_pool(), source));
  }
  absl::MutexLock lock(&mu_);
  progress_.Restore(state);
  if (own_run) {
    faults_.nonfinite_updates = state.nonfinite_updates();
    faults_.consecutive_nonfinite_updates =
        state.consecutive_nonfinite_updates();
  }
  checkpoints_.Resumed(progress_.updates());
  return absl::OkStatus();
}

absl::Status LearnerCore::Impl::RestoreLeaguePool(LeaguePoolState* state,
                                                  const std::string& source) {
  const LeaguePoolState& pool = *state;
  const int64_t interval = options_.spec.league().snapshot_interval();
  if (pool.versions().empty()) return absl::OkStatus();  // none, or older
  if (pool.snapshot_interval() != interval) {
    // Numbered otherwise than the actors number theirs: not sent.
    RL_LOG_WARNING(
        "{}: the league's kept versions were numbered with snapshot_interval "
        "{}, the run has {}; actors that start again begin with none of them",
        source, pool.snapshot_interval(), interval);
    return absl::OkStatus();
  }
  for (int i = 0; i < pool.versions_size(); ++i) {
    const int64_t version = pool.versions(i).version();
    if (version < 0 || (i > 0 && version <= pool.versions(i - 1).version())) {
      // Only what actors that start again begin with: the run goes on.
      RL_LOG_WARNING(
          "{}: training_state.league_pool.versions[{}].version {} is not "
          "after the one before it (nor at least 0); actors that start again "
          "begin with none of the kept versions",
          source, i, version);
      return absl::OkStatus();
    }
  }
  // Moved out (up to 128 MiB of weights): the state is not read for them
  // again.
  std::vector<LeagueVersionParameters> versions;
  versions.reserve(pool.versions_size());
  for (LeagueVersionParameters& version : *state->mutable_versions()) {
    versions.push_back(std::move(version));
  }
  RL_LOG_INFO("{}: {} of the league's versions kept (v{}-v{})", source,
              versions.size(), versions.front().version(),
              versions.back().version());
  publisher_.RestoreLeagueVersions(std::move(versions));
  return absl::OkStatus();
}

}  // namespace rl
