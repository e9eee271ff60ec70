// RunService and WorkerService over gRPC's callback API: each method
// converts the request, calls the CoordinatorCore and converts the status.
// WatchRun reactor: writes the run at once, then its newest state after each
// change (intermediate ones may be skipped while a write is in flight), and
// finishes after writing a final state.
#ifndef RL_COORDINATOR_COORDINATOR_SERVICE_H_
#define RL_COORDINATOR_COORDINATOR_SERVICE_H_

#include <atomic>

#include "coordinator/coordinator_core.h"
#include "proto/coordinator.grpc.pb.h"

namespace rl {

class RunServiceImpl final : public RunService::CallbackService {
 public:
  // At most `max_watchers` WatchRun streams at once; more are refused with
  // RESOURCE_EXHAUSTED naming the limit.
  explicit RunServiceImpl(CoordinatorCore* core, int max_watchers = 1024)
      : core_(core), max_watchers_(max_watchers) {}

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

  int watchers() const { return watchers_.load(); }
  // WatchRun streams refused by the limit so far.
  int64_t refused_watchers() const { return refused_watchers_.load(); }

 private:
  CoordinatorCore* core_;
  const int max_watchers_;
  std::atomic<int> watchers_{0};
  std::atomic<int64_t> refused_watchers_{0};
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
