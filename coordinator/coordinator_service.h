// RunService and WorkerService over gRPC's callback API: each method
// converts the request, calls the CoordinatorCore and converts the status.
// WatchRun reactor: writes the run at once, then its newest state after each
// change (intermediate ones may be skipped while a write is in flight), and
// finishes after writing a final state.
#ifndef RL_COORDINATOR_COORDINATOR_SERVICE_H_
#define RL_COORDINATOR_COORDINATOR_SERVICE_H_

#include <atomic>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/security.h"
#include "coordinator/coordinator_core.h"
#include "coordinator/sweep_manager.h"
#include "proto/coordinator.grpc.pb.h"

namespace rl {

// Open streams per caller identity, under a per-identity limit.
class StreamSlots {
 public:
  explicit StreamSlots(int max_per_caller) : max_(max_per_caller) {}
  // False (and counted) when `caller` already holds max_per_caller.
  bool Take(const std::string& caller) ABSL_LOCKS_EXCLUDED(mu_);
  void Release(const std::string& caller) ABSL_LOCKS_EXCLUDED(mu_);
  int max() const { return max_; }
  int64_t refused() const { return refused_.load(); }

 private:
  const int max_;
  std::atomic<int64_t> refused_{0};
  absl::Mutex mu_;
  std::map<std::string, int> open_ ABSL_GUARDED_BY(mu_);
};

class RunServiceImpl final : public RunService::CallbackService {
 public:
  // At most `max_watchers` WatchRun streams at once, and
  // `max_watchers_per_user` of one caller; more are refused with
  // RESOURCE_EXHAUSTED naming the limit.
  // Callers are identified by `security`'s tokens (null: the process
  // default), per call (CallerIdentity).
  // `sweeps` (null: the sweep calls are UNIMPLEMENTED) runs SubmitSweep
  // and the rest.
  explicit RunServiceImpl(CoordinatorCore* core, int max_watchers = 1024,
                          int max_watchers_per_user = 64,
                          std::shared_ptr<const Security> security = nullptr,
                          SweepManager* sweeps = nullptr)
      : core_(core),
        sweeps_(sweeps),
        security_(security != nullptr ? std::move(security)
                                      : Security::ProcessDefault()),
        max_watchers_(max_watchers),
        user_watchers_(max_watchers_per_user) {}

  grpc::ServerUnaryReactor* SubmitRun(grpc::CallbackServerContext* context,
                                      const SubmitRunRequest* request,
                                      SubmitRunResponse* response) override;
  grpc::ServerUnaryReactor* GetRun(grpc::CallbackServerContext* context,
                                   const GetRunRequest* request,
                                   Run* response) override;
  grpc::ServerUnaryReactor* ListRuns(grpc::CallbackServerContext* context,
                                     const ListRunsRequest* request,
                                     ListRunsResponse* response) override;
  grpc::ServerUnaryReactor* CancelRun(grpc::CallbackServerContext* context,
                                      const CancelRunRequest* request,
                                      Run* response) override;
  grpc::ServerWriteReactor<RunEvent>* WatchRun(
      grpc::CallbackServerContext* context,
      const WatchRunRequest* request) override;
  grpc::ServerUnaryReactor* ListWorkers(grpc::CallbackServerContext* context,
                                        const ListWorkersRequest* request,
                                        ListWorkersResponse* response) override;

  grpc::ServerUnaryReactor* SubmitSweep(grpc::CallbackServerContext* context,
                                        const SubmitSweepRequest* request,
                                        Sweep* response) override;
  grpc::ServerUnaryReactor* GetSweep(grpc::CallbackServerContext* context,
                                     const GetSweepRequest* request,
                                     Sweep* response) override;
  grpc::ServerUnaryReactor* ListSweeps(grpc::CallbackServerContext* context,
                                       const ListSweepsRequest* request,
                                       ListSweepsResponse* response) override;
  grpc::ServerUnaryReactor* CancelSweep(grpc::CallbackServerContext* context,
                                        const CancelSweepRequest* request,
                                        Sweep* response) override;
  grpc::ServerUnaryReactor* AddSweepTrial(grpc::CallbackServerContext* context,
                                          const AddSweepTrialRequest* request,
                                          Sweep* response) override;

  int watchers() const { return watchers_.load(); }
  // WatchRun streams refused by the limit so far.
  int64_t refused_watchers() const { return refused_watchers_.load(); }
  // ... by the per-user limit.
  int64_t refused_user_watchers() const { return user_watchers_.refused(); }

 private:
  CoordinatorCore* core_;
  SweepManager* sweeps_;
  const std::shared_ptr<const Security> security_;
  const int max_watchers_;
  std::atomic<int> watchers_{0};
  std::atomic<int64_t> refused_watchers_{0};
  StreamSlots user_watchers_;
};

class WorkerServiceImpl final : public WorkerService::CallbackService {
 public:
  explicit WorkerServiceImpl(CoordinatorCore* core) : core_(core) {}

  grpc::ServerUnaryReactor* RegisterWorker(
      grpc::CallbackServerContext* context,
      const RegisterWorkerRequest* request,
      RegisterWorkerResponse* response) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* context,
                                      const HeartbeatRequest* request,
                                      HeartbeatResponse* response) override;
  grpc::ServerUnaryReactor* ReportStatus(
      grpc::CallbackServerContext* context, const ReportStatusRequest* request,
      ReportStatusResponse* response) override;

 private:
  CoordinatorCore* core_;
};

}  // namespace rl

#endif  // RL_COORDINATOR_COORDINATOR_SERVICE_H_
