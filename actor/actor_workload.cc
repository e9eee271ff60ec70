#include "actor/actor_workload.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/process_memory.h"
#include "common/status.h"
#include "runspec/run_spec.h"
#include "telemetry/client/emitter.h"

namespace rl {

ActorWorkload::ActorWorkload(const ActorWorkloadOptions& options)
    : options_(options) {}

ActorWorkload::~ActorWorkload() { Stop(); }

absl::Status ActorWorkload::Start(const Assignment& assignment) {
  Stop();
  assignment_id_.store(assignment.assignment_id());
  if (assignment.learner_addresses().empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "assignment ", assignment.assignment_id(), " names no learner"));
  }
  ActorOptions options;
  // A gang of learners splits the actors (the learner counts its share by
  // the same rule). With a learner per policy the others follow the gang:
  // the actors stream to it alone.
  const int gang =
      std::min(std::max(1, assignment.spec().resources().num_learners()),
               assignment.learner_addresses_size());
  options.learner_address =
      assignment.learner_addresses(LearnerRankOfActor(assignment.rank(), gang));
  options.security = options_.security;
  options.spec = assignment.spec();
  options.run_id = assignment.run_id();
  options.run_key = assignment.run_key();
  options.actor_id = assignment.rank();
  options.env_threads = options_.env_threads;
  options.env_plugin_dirs = options_.env_plugin_dirs;
  options.shared_memory = options_.shared_memory;
  options.profile_segments = options_.profile_segments;
  options.profile_path = options_.profile_path;
  options.max_disconnected = options_.max_disconnected;
  options.emitter = options_.emitter;
  if (options.emitter != nullptr) options.emitter->SetRun(assignment.run_id());
  ASSIGN_OR_RETURN(std::unique_ptr<ActorClient> client,
                   ActorClient::Create(options));
  {
    absl::MutexLock lock(&client_mu_);
    client_ = std::move(client);
    run_id_ = assignment.run_id();
  }
  RL_LOG_INFO("actor {} of run {} (learner {})", assignment.rank(),
              assignment.run_id(), options.learner_address);
  {
    absl::MutexLock lock(&mu_);
    ended_ = false;
    result_ = absl::OkStatus();
  }
  runner_ = StartThread("actor-run", [this, client = client_.get()] {
    const absl::Status status = client->Run();
    if (!status.ok()) RL_LOG_WARNING("actor ended: {}", status.ToString());
    absl::MutexLock lock(&mu_);
    ended_ = true;
    result_ = status;
  });
  return absl::OkStatus();
}

WorkloadState ActorWorkload::Poll() {
  WorkloadState state;
  absl::MutexLock lock(&mu_);
  state.finished = client_ != nullptr && ended_;
  state.status = result_;
  return state;
}

void ActorWorkload::Stop() {
  if (client_ != nullptr) client_->Stop();
  if (runner_.joinable()) runner_.join();
  absl::MutexLock lock(&client_mu_);
  client_.reset();
}

void ActorWorkload::Idle() {
  Stop();  // the run's envs (and what their plugin holds) go first
  if (options_.max_rss_bytes <= 0 || !options_.recycle) return;
  const int64_t rss = ProcessRssBytes();
  if (rss > options_.max_rss_bytes) options_.recycle(rss);
}

std::optional<std::pair<std::string, ActorCounters>> ActorWorkload::Counters()
    const {
  absl::MutexLock lock(&client_mu_);
  if (client_ == nullptr) return std::nullopt;
  return std::make_pair(run_id_, client_->counters());
}

}  // namespace rl
