// Placement of runs on workers; pure logic over an injected clock, no I/O.
//
// Workers register (role, CPUs, devices) and hold a lease renewed by
// heartbeats; a worker whose lease expires is gone and its run loses it.
// Runs wait in a queue ordered by priority (higher first), then submission
// order. A run is placed as a gang: all its learners and at least
// min_actors actors at once (actors up to num_actors when free), on workers
// whose devices fit; otherwise it keeps waiting and does not block smaller
// runs behind it from fitting elsewhere.
#ifndef RL_COORDINATOR_SCHEDULER_H_
#define RL_COORDINATOR_SCHEDULER_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/coordinator.pb.h"
#include "runspec/run_footprint.h"

namespace rl {

struct SchedulerWorker {
  std::string worker_id;
  WorkerRole role = WORKER_ROLE_UNSPECIFIED;
  std::vector<std::string> devices;  // e.g. {"cuda:0"}; empty: CPU only
  std::string address;
  // Learners: host:port of their rendezvous store.
  std::string rendezvous_address;
  // The memory its host reports; 0: unknown (fits any run).
  int64_t memory_bytes = 0;
  int64_t epoch = 0;
  absl::Time lease_expiry;
  std::string run_id;  // empty: idle
  int rank = 0;
  // Bumped every time the scheduler gives the worker a run, so that a new
  // placement on the same run is still a new assignment.
  int64_t placement = 0;
};

struct Placement {
  std::string run_id;
  std::vector<std::string> learners;  // worker ids, rank order
  std::vector<std::string> actors;
};

// Worker names in the order a person counts them: runs of digits compare as
// numbers ("local-learner-2" before "local-learner-10"), the rest as text.
// Free workers are taken in this order, so on a pool of local workers rank
// r of a run placed alone sits on local-learner-r (and GPU r mod G).
struct WorkerNameLess {
  bool operator()(const std::string& a, const std::string& b) const;
};

// A worker that was lost, and the run it was working for (may be empty).
struct LostWorker {
  std::string worker_id;
  WorkerRole role = WORKER_ROLE_UNSPECIFIED;
  std::string run_id;
};

class Scheduler {
 public:
  using Clock = std::function<absl::Time()>;
  using FootprintEstimator = std::function<RunFootprint(const RunSpec&)>;
  // A run's footprint is estimated once, when it is first queued or marked
  // placed, and kept while the scheduler knows the run (tests count the
  // estimates through `estimate_footprint`).
  Scheduler(Clock clock, absl::Duration lease_ttl,
            FootprintEstimator estimate_footprint = EstimateRunFootprint);

  // Registers (or re-registers, keeping the id) worker `worker_id`; a new
  // epoch is granted. If `run_id` is non-empty the worker keeps running it
  // (after a coordinator restart) as rank `rank`.
  Lease Register(const std::string& worker_id, WorkerRole role,
                 std::vector<std::string> devices, const std::string& address,
                 const std::string& run_id = "", int rank = 0);

  // Records where learner `worker_id` hosts its rendezvous store.
  void SetRendezvousAddress(const std::string& worker_id,
                            const std::string& address);

  // Records the memory worker `worker_id` has (its host's, in bytes); a run
  // whose estimated footprint (runspec/run_footprint.h) is larger does not
  // go there.
  void SetMemory(const std::string& worker_id, int64_t bytes);

  // Renews the lease. NOT_FOUND for an unknown worker, FAILED_PRECONDITION
  // for an expired lease or a stale epoch (the worker must re-register).
  absl::StatusOr<Lease> Heartbeat(const std::string& worker_id, int64_t epoch);

  // Removes every worker whose lease has expired.
  std::vector<LostWorker> ExpireLeases();
  // Removes worker `worker_id` now, as an expired lease would (its process
  // is known to have ended); nullopt if it is not registered.
  std::optional<LostWorker> Remove(const std::string& worker_id);

  // Queues run `run_id` (idempotent).
  void Enqueue(const std::string& run_id, const RunSpec& spec, int64_t order);
  // After a coordinator restart: `run_id` was placed (RUNNING), so workers
  // that re-register with it keep it.
  void MarkPlaced(const std::string& run_id, const RunSpec& spec);
  // Dequeues it or frees its workers; returns the workers freed.
  std::vector<std::string> Release(const std::string& run_id);

  // Places as many queued runs as fit, best first.
  std::vector<Placement> Place();

  // Runs that still need actors (placed with fewer than num_actors) get idle
  // actors; returns (run_id, worker_id) pairs.
  std::vector<std::pair<std::string, std::string>> TopUpActors();

  // Why queued run `run_id` does not fit now ("" if it is not queued or
  // would fit), e.g. "needs 2 learners (cpu): 1 idle of 1 registered".
  std::string WhyWaiting(const std::string& run_id) const;

  // Whether queued run `run_id` would fit if every registered worker were
  // idle: false when no worker has the device, enough memory, or there are
  // too few workers of a role. Such a run can only wait for new workers.
  bool CouldEverPlace(const std::string& run_id) const;
  std::vector<std::string> QueuedRuns() const;

  // Frees `worker_id` from its run (e.g. an actor that failed); the run's
  // placement keeps its other workers and tops the actor up again.
  void ReleaseWorker(const std::string& worker_id);

  // A fixed pool (the embedded system's local workers): the workers that
  // will register, by name, with any devices until they do. With one, runs
  // no registered or expected worker could ever hold are known at once.
  void SetExpectedWorkers(std::vector<SchedulerWorker> expected);
  // Why `spec` could never be placed on the registered and expected
  // workers ("" when it could, or when no pool is fixed).
  std::string WhyNeverPlaced(const RunSpec& spec) const;
  // The same for queued run `run_id`.
  std::string WhyNeverPlaced(const std::string& run_id) const;
  bool pool_fixed() const { return !expected_.empty(); }

  // Placed runs none of whose learners is registered.
  std::vector<std::string> PlacedRunsWithoutLearners() const;

  const SchedulerWorker* worker(const std::string& worker_id) const;
  std::vector<SchedulerWorker> workers() const;
  bool queued(const std::string& run_id) const;

 private:
  struct QueuedRun {
    std::string run_id;
    RunSpec spec;
    RunFootprint footprint;
    int64_t order = 0;
  };
  // Idle, of `role`, with `device`, and with `bytes` of memory (if known).
  bool Fits(const SchedulerWorker& w, WorkerRole role,
            const std::string& device, double bytes) const;
  // How queued run `q` fares on the registered workers: one reason per role
  // that falls short ("" when it would fit now); `if_idle`: as if every
  // worker were idle, and counting the expected ones not registered yet
  // (which fit any device).
  std::vector<std::string> Shortfalls(const QueuedRun& q, bool if_idle) const;
  void Assign(SchedulerWorker& w, const std::string& run_id, int rank);

  struct PlacedRun {
    RunSpec spec;
    RunFootprint footprint;
  };

  Clock clock_;
  absl::Duration lease_ttl_;
  FootprintEstimator estimate_footprint_;
  int64_t next_epoch_ = 0;
  int64_t next_placement_ = 0;
  std::map<std::string, SchedulerWorker, WorkerNameLess> workers_;
  std::map<std::string, SchedulerWorker, WorkerNameLess> expected_;
  std::vector<QueuedRun> queue_;
  std::map<std::string, PlacedRun> placed_;
};

}  // namespace rl

#endif  // RL_COORDINATOR_SCHEDULER_H_
