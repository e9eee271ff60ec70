#include "coordinator/coordinator_service.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc_status.h"
#include "common/security.h"
#include "common/stream_reactor.h"

namespace rl {
namespace {

bool IsFinal(RunState state) {
  return state == SUCCEEDED || state == FAILED || state == CANCELLED;
}

// RunService.WatchRun: the newest state of one run, then OK after a final
// state.
class WatchReactor final
    : public StreamWriteReactor<RunEvent, NewestWaiting<Run>> {
 public:
  // Counts itself in `*watchers` until done; beyond `max_watchers` it ends
  // at once with RESOURCE_EXHAUSTED.
  WatchReactor(CoordinatorCore* core, const std::string& run_id,
               std::atomic<int>* watchers, int max_watchers,
               std::atomic<int64_t>* refused, StreamSlots* user_slots,
               const std::string& user)
      // The newest run by generation waits (progress keeps the generation).
      : StreamWriteReactor(
            NewestWaiting<Run>([](const Run& waiting, const Run& incoming) {
              return incoming.generation() >= waiting.generation();
            })),
        core_(core),
        run_id_(run_id),
        watchers_(watchers),
        user_(user) {
    if (watchers_->fetch_add(1) < max_watchers) {
      if (user_slots->Take(user)) {
        user_slots_ = user_slots;
      } else {
        FinishOnce(grpc::Status(
            grpc::StatusCode::RESOURCE_EXHAUSTED,
            absl::StrCat(user, " has ", user_slots->max(),
                         " run watchers open, at most ", user_slots->max(),
                         " (--max_watchers_per_user); retry once one has "
                         "ended")));
        return;
      }
    } else {
      refused->fetch_add(1);
      FinishOnce(grpc::Status(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          absl::StrCat("the coordinator has ", max_watchers,
                       " run watchers, at most ", max_watchers,
                       " (--max_watchers); retry once one has ended")));
      return;
    }
    auto run = core_->GetRun(run_id);
    if (!run.ok()) {
      FinishOnce(ToGrpcStatus(run.status()));
      return;
    }
    watch_id_ = core_->Watch([this](const Run& r) {
      if (r.run_id() == run_id_) Send(r);
    });
    Send(*std::move(run));
  }

 private:
  void ToMessageLocked(Run run, RunEvent* out) override {
    *out->mutable_run() = std::move(run);
  }

  void OnWrittenLocked(const RunEvent& written) override {
    if (IsFinal(written.run().state())) FinishLocked(grpc::Status::OK);
  }

  void OnStop() override {
    if (watch_id_ != 0) core_->Unwatch(watch_id_);
    watchers_->fetch_sub(1);
    if (user_slots_ != nullptr) user_slots_->Release(user_);
  }

  CoordinatorCore* core_;
  const std::string run_id_;
  std::atomic<int>* const watchers_;
  const std::string user_;
  StreamSlots* user_slots_ = nullptr;  // set once a slot is taken
  int64_t watch_id_ = 0;
};

}  // namespace

namespace {

// The caller as the core's ownership rule sees it.
Requester RequesterOf(const grpc::CallbackServerContext& context,
                      const Security& security) {
  const Identity identity = CallerIdentity(context, security);
  return Requester{identity.name, identity.role == kRoleAdmin};
}

}  // namespace

grpc::ServerUnaryReactor* RunServiceImpl::SubmitRun(
    grpc::CallbackServerContext* context, const SubmitRunRequest* request,
    SubmitRunResponse* response) {
  return ReplyUnary(
      context,
      core_->SubmitRun(*request, CallerIdentity(*context, *security_).name),
      response);
}

grpc::ServerUnaryReactor* RunServiceImpl::GetRun(
    grpc::CallbackServerContext* context, const GetRunRequest* request,
    Run* response) {
  return ReplyUnary(context,
                    core_->GetRun(request->run_id(), request->with_history()),
                    response);
}

grpc::ServerUnaryReactor* RunServiceImpl::ListRuns(
    grpc::CallbackServerContext* context, const ListRunsRequest* request,
    ListRunsResponse* response) {
  return ReplyUnary(context, core_->ListRuns(*request), response);
}

grpc::ServerUnaryReactor* RunServiceImpl::CancelRun(
    grpc::CallbackServerContext* context, const CancelRunRequest* request,
    Run* response) {
  return ReplyUnary(
      context,
      core_->CancelRunFor(request->run_id(), RequesterOf(*context, *security_)),
      response);
}

grpc::ServerWriteReactor<RunEvent>* RunServiceImpl::WatchRun(
    grpc::CallbackServerContext* context, const WatchRunRequest* request) {
  return new WatchReactor(core_, request->run_id(), &watchers_, max_watchers_,
                          &refused_watchers_, &user_watchers_,
                          CallerIdentity(*context, *security_).name);
}

bool StreamSlots::Take(const std::string& caller) {
  absl::MutexLock lock(&mu_);
  int& open = open_[caller];
  if (max_ > 0 && open >= max_) {
    if (open == 0) open_.erase(caller);
    refused_.fetch_add(1);
    return false;
  }
  ++open;
  return true;
}

void StreamSlots::Release(const std::string& caller) {
  absl::MutexLock lock(&mu_);
  auto it = open_.find(caller);
  if (it != open_.end() && --it->second <= 0) open_.erase(it);
}

grpc::ServerUnaryReactor* RunServiceImpl::ListWorkers(
    grpc::CallbackServerContext* context, const ListWorkersRequest*,
    ListWorkersResponse* response) {
  return ReplyUnary(context,
                    absl::StatusOr<ListWorkersResponse>(core_->ListWorkers()),
                    response);
}

namespace {

absl::Status NoSweeps() {
  return absl::UnimplementedError("this coordinator runs no sweeps");
}

}  // namespace

grpc::ServerUnaryReactor* RunServiceImpl::SubmitSweep(
    grpc::CallbackServerContext* context, const SubmitSweepRequest* request,
    Sweep* response) {
  if (sweeps_ == nullptr) {
    return ReplyUnary(context, absl::StatusOr<Sweep>(NoSweeps()), response);
  }
  return ReplyUnary(
      context,
      sweeps_->Submit(*request, CallerIdentity(*context, *security_).name),
      response);
}

grpc::ServerUnaryReactor* RunServiceImpl::GetSweep(
    grpc::CallbackServerContext* context, const GetSweepRequest* request,
    Sweep* response) {
  return ReplyUnary(context,
                    sweeps_ == nullptr ? absl::StatusOr<Sweep>(NoSweeps())
                                       : sweeps_->Get(request->sweep_id()),
                    response);
}

grpc::ServerUnaryReactor* RunServiceImpl::ListSweeps(
    grpc::CallbackServerContext* context, const ListSweepsRequest*,
    ListSweepsResponse* response) {
  return ReplyUnary(context,
                    sweeps_ == nullptr
                        ? absl::StatusOr<ListSweepsResponse>(NoSweeps())
                        : sweeps_->List(),
                    response);
}

grpc::ServerUnaryReactor* RunServiceImpl::CancelSweep(
    grpc::CallbackServerContext* context, const CancelSweepRequest* request,
    Sweep* response) {
  return ReplyUnary(context,
                    sweeps_ == nullptr
                        ? absl::StatusOr<Sweep>(NoSweeps())
                        : sweeps_->Cancel(request->sweep_id(),
                                          RequesterOf(*context, *security_)),
                    response);
}

grpc::ServerUnaryReactor* RunServiceImpl::AddSweepTrial(
    grpc::CallbackServerContext* context, const AddSweepTrialRequest* request,
    Sweep* response) {
  return ReplyUnary(
      context,
      sweeps_ == nullptr
          ? absl::StatusOr<Sweep>(NoSweeps())
          : sweeps_->AddTrial(*request, RequesterOf(*context, *security_)),
      response);
}

grpc::ServerUnaryReactor* WorkerServiceImpl::RegisterWorker(
    grpc::CallbackServerContext* context, const RegisterWorkerRequest* request,
    RegisterWorkerResponse* response) {
  return ReplyUnary(context, core_->RegisterWorker(*request), response);
}

grpc::ServerUnaryReactor* WorkerServiceImpl::Heartbeat(
    grpc::CallbackServerContext* context, const HeartbeatRequest* request,
    HeartbeatResponse* response) {
  return ReplyUnary(context, core_->Heartbeat(*request), response);
}

grpc::ServerUnaryReactor* WorkerServiceImpl::ReportStatus(
    grpc::CallbackServerContext* context, const ReportStatusRequest* request,
    ReportStatusResponse* response) {
  absl::Status status = core_->ReportStatus(*request);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

}  // namespace rl
