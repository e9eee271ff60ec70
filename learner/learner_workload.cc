#include "learner/learner_workload.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/secrets.h"
#include "common/status.h"
#include "learner/c10d_collective.h"
#include "policy/compute_device.h"
#include "runspec/run_spec.h"

namespace rl {

LearnerWorkload::LearnerWorkload(
    LearnerServiceImpl* service, Emitter* emitter,
    std::function<void(std::shared_ptr<LearnerCore>)> on_core,
    std::string collective_address, absl::Duration rendezvous_timeout,
    std::shared_ptr<SegmentBudget> segment_budget,
    PolicyLearnerServiceImpl* policy_service)
    : service_(service),
      emitter_(emitter),
      on_core_(std::move(on_core)),
      collective_address_(std::move(collective_address)),
      rendezvous_timeout_(rendezvous_timeout),
      segment_budget_(std::move(segment_budget)),
      policy_service_(policy_service) {}

LearnerWorkload::~LearnerWorkload() { Stop(); }

void LearnerWorkload::SetCore(std::shared_ptr<LearnerCore> core,
                              std::string run_key) {
  core_ = core;
  service_->SetCore(core, std::move(run_key));
  if (on_core_) on_core_(std::move(core));
}

absl::Status LearnerWorkload::StartPolicyLearner(
    const Assignment& assignment, const std::function<bool()>& cancelled) {
  const RunSpec& spec = assignment.spec();
  if (policy_service_ == nullptr) {
    return absl::FailedPreconditionError(
        "this learner process cannot train a policy of its own "
        "(resources.learner_per_policy)");
  }
  if (assignment.rank() >= LearnerProcesses(spec)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "assignment of run ", assignment.run_id(), ": learner rank ",
        assignment.rank(), " of a run of ", LearnerProcesses(spec),
        " learners (", spec.policies_size(), " policies, each on ",
        spec.resources().num_learners(), " of its own)"));
  }
  const LearnerRole role = LearnerRoleOf(spec, assignment.rank());
  ASSIGN_OR_RETURN(
      const torch::Device device,
      ResolveComputeDevice(spec.resources().learner_device(),
                           "resources.learner_device", "this learner"));
  PolicyLearnerOptions options;
  options.spec = spec;
  options.run_id = assignment.run_id();
  options.policy = spec.policies(role.policy).name();
  options.run_dir = assignment.checkpoint_dir();
  options.gang_id = assignment.gang_id();
  options.device = device;
  options.member = role.member;
  options.gang_size = assignment.world_size() > 1 ? assignment.world_size() : 1;
  if (emitter_ != nullptr) {
    emitter_->SetRun(assignment.run_id());
    MetricLabelList labels = {{"policy", options.policy}};
    if (options.gang_size > 1) {
      // Not "rank": rank r of the run's gang labels this policy's update
      // figures {policy, rank: r} already.
      labels.emplace_back("member", absl::StrCat(role.member));
    }
    emitter_->SetDefaultLabels(labels);
  }
  ASSIGN_OR_RETURN(std::unique_ptr<PolicyLearner> learner,
                   PolicyLearner::Create(options));
  policy_learner_ = std::move(learner);
  // Served before its gang meets: a resume reads member 0's checkpoint
  // while the others may still be starting (its updates wait for the gang).
  policy_service_->SetLearner(policy_learner_, assignment.run_key(),
                              assignment.gang_id());
  if (options.gang_size > 1) {
    // The policy's gang meets at the run's rendezvous store, under keys of
    // its own.
    absl::StatusOr<std::unique_ptr<Collective>> gang =
        JoinGang(assignment, role.member,
                 absl::StrCat(assignment.gang_id(), "/policy/", options.policy),
                 cancelled);
    absl::Status joined = gang.status();
    if (joined.ok()) joined = policy_learner_->JoinGang(*std::move(gang));
    if (!joined.ok()) {
      Stop();
      return joined;
    }
  }
  RL_LOG_INFO("training policy {} of run {} for its learner (rank {})",
              options.policy, assignment.run_id(), role.member);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Collective>> LearnerWorkload::JoinGang(
    const Assignment& assignment, int rank, const std::string& gang_id,
    const std::function<bool()>& cancelled) {
  if (assignment.rendezvous_address().empty() || assignment.gang_id().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "assignment of run ", assignment.run_id(), ": rank ", assignment.rank(),
        " of ", assignment.world_size(),
        " without a rendezvous address (rank 0's learner reported none)"));
  }
  CollectiveOptions collective;
  collective.rank = rank;
  collective.world_size = assignment.world_size();
  collective.rendezvous_address = assignment.rendezvous_address();
  collective.gang_id = gang_id;
  if (!assignment.run_key().empty()) {
    collective.store_secret =
        DeriveKey(assignment.run_key(), absl::StrCat("rendezvous/", gang_id));
  }
  collective.bind_address = collective_address_;
  collective.rendezvous_timeout = rendezvous_timeout_;
  collective.cancelled = cancelled;
  collective.backend = GangCollectiveBackend(assignment.spec());
  collective.device = assignment.spec().resources().learner_device();
  RL_LOG_INFO("joining learner gang {} as rank {} of {} at {}",
              collective.gang_id, collective.rank, collective.world_size,
              collective.rendezvous_address);
  return ConnectCollective(collective);
}

absl::Status LearnerWorkload::Start(const Assignment& assignment) {
  // True once a newer assignment is waiting (a Cancel since the runtime
  // picked this one): a rendezvous in progress gives up.
  const std::function<bool()> cancelled = Superseded();
  Stop();
  if (LearnerRoleOf(assignment.spec(), assignment.rank()).policy > 0) {
    return StartPolicyLearner(assignment, cancelled);
  }
  LearnerOptions options;
  options.spec = assignment.spec();
  options.run_id = assignment.run_id();
  options.run_dir = assignment.checkpoint_dir();
  options.start_from = assignment.start_from();
  options.stop_env_steps = assignment.stop_env_steps();
  options.profile_updates = profile_updates_;
  options.profile_path = profile_path_;
  options.emitter = emitter_;
  options.segment_budget = segment_budget_;
  if (assignment.spec().resources().learner_per_policy()) {
    // Policy k's gang holds ranks k * N .. k * N + N - 1; this rank's rows
    // of policy k go to the member of its own rank.
    const RunSpec& spec = assignment.spec();
    const int learners = LearnerProcesses(spec);
    if (assignment.learner_addresses_size() != learners) {
      return absl::InternalError(
          absl::StrCat("assignment of run ", assignment.run_id(), ": ",
                       assignment.learner_addresses_size(),
                       " learner addresses for its ", learners, " learners (",
                       spec.resources().num_learners(), " per policy)"));
    }
    for (int rank : PolicyLearnerRanks(spec, assignment.rank())) {
      options.policy_learners.push_back(assignment.learner_addresses(rank));
    }
    options.run_key = assignment.run_key();
    options.gang_id = assignment.gang_id();
    options.cancelled = cancelled;
  }
  if (emitter_ != nullptr) {
    emitter_->SetRun(assignment.run_id());
    emitter_->SetDefaultLabels({});
  }
  if (assignment.world_size() > 1) {
    ASSIGN_OR_RETURN(options.collective,
                     JoinGang(assignment, assignment.rank(),
                              assignment.gang_id(), cancelled));
    if (emitter_ != nullptr) {
      emitter_->SetDefaultLabels({{"rank", absl::StrCat(assignment.rank())}});
    }
  }
  absl::StatusOr<std::unique_ptr<LearnerCore>> core =
      LearnerCore::Create(options);
  if (!core.ok() && cancelled()) {
    // Replaced while starting (a resume waiting for a policy's learner,
    // say): not a failure of the new assignment's run.
    return absl::CancelledError(
        absl::StrCat("replaced while starting: ", core.status().message()));
  }
  RETURN_IF_ERROR(core.status());
  SetCore(*std::move(core), assignment.run_key());
  return absl::OkStatus();
}

WorkloadState LearnerWorkload::Poll() {
  WorkloadState state;
  // A policy's learner ends with its run (rank 0 speaks for it).
  if (core_ == nullptr) return state;
  state.finished = core_->WaitUntilDone(absl::ZeroDuration());
  state.status = core_->final_status();
  // Rank 0 speaks for a gang's progress (the coordinator ignores others').
  state.progress = core_->GetStatus().progress();
  return state;
}

void LearnerWorkload::Stop() {
  if (core_ != nullptr) SetCore(nullptr);
  if (policy_learner_ != nullptr) {
    policy_service_->SetLearner(nullptr, "");
    policy_learner_.reset();
  }
}

}  // namespace rl
