#include "coordinator/scheduler.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runspec/run_spec.h"

namespace rl {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

bool WorkerNameLess::operator()(const std::string& a,
                                const std::string& b) const {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (IsDigit(a[i]) && IsDigit(b[j])) {
      size_t ie = i, je = j;
      while (ie < a.size() && IsDigit(a[ie])) ++ie;
      while (je < b.size() && IsDigit(b[je])) ++je;
      size_t is = i, js = j;  // the numbers without their leading zeros
      while (is + 1 < ie && a[is] == '0') ++is;
      while (js + 1 < je && b[js] == '0') ++js;
      if (ie - is != je - js) return ie - is < je - js;
      const int c = a.compare(is, ie - is, b, js, je - js);
      if (c != 0) return c < 0;
      i = ie;
      j = je;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
    }
  }
  if (i < a.size() || j < b.size()) return j < b.size();  // a prefix first
  return a < b;  // equal as numbers ("7" and "07"): still two names
}

Scheduler::Scheduler(Clock clock, absl::Duration lease_ttl,
                     FootprintEstimator estimate_footprint)
    : clock_(std::move(clock)),
      lease_ttl_(lease_ttl),
      estimate_footprint_(std::move(estimate_footprint)) {}

Lease Scheduler::Register(const std::string& worker_id, WorkerRole role,
                          std::vector<std::string> devices,
                          const std::string& address, const std::string& run_id,
                          int rank) {
  SchedulerWorker& w = workers_[worker_id];
  w.worker_id = worker_id;
  w.role = role;
  w.devices = std::move(devices);
  w.address = address;
  w.epoch = ++next_epoch_;
  w.lease_expiry = clock_() + lease_ttl_;
  // A worker keeps the run it reports only if that run is still placed (a
  // coordinator restart restores placed runs with MarkPlaced).
  const bool keep = !run_id.empty() && placed_.count(run_id) > 0;
  w.run_id = keep ? run_id : "";
  w.rank = keep ? rank : 0;
  Lease lease;
  lease.set_ttl_seconds(absl::ToDoubleSeconds(lease_ttl_));
  lease.set_epoch(w.epoch);
  return lease;
}

void Scheduler::SetRendezvousAddress(const std::string& worker_id,
                                     const std::string& address) {
  auto it = workers_.find(worker_id);
  if (it != workers_.end()) it->second.rendezvous_address = address;
}

void Scheduler::SetMemory(const std::string& worker_id, int64_t bytes) {
  auto it = workers_.find(worker_id);
  if (it != workers_.end())
    it->second.memory_bytes = std::max<int64_t>(0, bytes);
}

void Scheduler::ReleaseWorker(const std::string& worker_id) {
  auto it = workers_.find(worker_id);
  if (it != workers_.end()) it->second.run_id.clear();
}

absl::StatusOr<Lease> Scheduler::Heartbeat(const std::string& worker_id,
                                           int64_t epoch) {
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) {
    return absl::NotFoundError(
        absl::StrCat("unknown worker ", worker_id, "; register first"));
  }
  SchedulerWorker& w = it->second;
  if (epoch != w.epoch) {
    return absl::FailedPreconditionError(absl::StrCat(
        "stale lease epoch ", epoch, " (current ", w.epoch, "); re-register"));
  }
  if (clock_() > w.lease_expiry) {
    return absl::FailedPreconditionError("lease expired; re-register");
  }
  w.lease_expiry = clock_() + lease_ttl_;
  Lease lease;
  lease.set_ttl_seconds(absl::ToDoubleSeconds(lease_ttl_));
  lease.set_epoch(w.epoch);
  return lease;
}

std::vector<LostWorker> Scheduler::ExpireLeases() {
  std::vector<LostWorker> lost;
  const absl::Time now = clock_();
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (now > it->second.lease_expiry) {
      lost.push_back({it->first, it->second.role, it->second.run_id});
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
  return lost;
}

std::optional<LostWorker> Scheduler::Remove(const std::string& worker_id) {
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return std::nullopt;
  LostWorker lost{it->first, it->second.role, it->second.run_id};
  workers_.erase(it);
  return lost;
}

void Scheduler::Enqueue(const std::string& run_id, const RunSpec& spec,
                        int64_t order) {
  if (queued(run_id)) return;
  // A placed run sent back to the queue keeps its footprint.
  auto placed = placed_.find(run_id);
  RunFootprint footprint = placed != placed_.end() ? placed->second.footprint
                                                   : estimate_footprint_(spec);
  if (placed != placed_.end()) placed_.erase(placed);
  for (auto& [id, w] : workers_) {
    if (w.run_id == run_id) w.run_id.clear();
  }
  queue_.push_back({run_id, spec, footprint, order});
}

void Scheduler::MarkPlaced(const std::string& run_id, const RunSpec& spec) {
  placed_[run_id] = {spec, estimate_footprint_(spec)};
}

std::vector<std::string> Scheduler::Release(const std::string& run_id) {
  queue_.erase(
      std::remove_if(queue_.begin(), queue_.end(),
                     [&](const QueuedRun& q) { return q.run_id == run_id; }),
      queue_.end());
  placed_.erase(run_id);
  std::vector<std::string> freed;
  for (auto& [id, w] : workers_) {
    if (w.run_id == run_id) {
      w.run_id.clear();
      freed.push_back(id);
    }
  }
  return freed;
}

void Scheduler::Assign(SchedulerWorker& w, const std::string& run_id,
                       int rank) {
  w.run_id = run_id;
  w.rank = rank;
  w.placement = ++next_placement_;
}

bool Scheduler::Fits(const SchedulerWorker& w, WorkerRole role,
                     const std::string& device, double bytes) const {
  if (w.role != role || !w.run_id.empty()) return false;
  if (w.memory_bytes > 0 && bytes > static_cast<double>(w.memory_bytes)) {
    return false;
  }
  if (device.empty() || device == "cpu") return true;
  // "cuda" fits any CUDA device, "cuda:N" that one.
  for (const std::string& d : w.devices) {
    if (device == "cuda" ? absl::StartsWith(d, "cuda") : d == device) {
      return true;
    }
  }
  return false;
}

std::vector<Placement> Scheduler::Place() {
  std::stable_sort(queue_.begin(), queue_.end(),
                   [](const QueuedRun& a, const QueuedRun& b) {
                     if (a.spec.priority() != b.spec.priority()) {
                       return a.spec.priority() > b.spec.priority();
                     }
                     return a.order < b.order;
                   });
  std::vector<Placement> placements;
  for (auto q = queue_.begin(); q != queue_.end();) {
    const Resources& res = q->spec.resources();
    const int num_learners = LearnerProcesses(q->spec);
    std::vector<std::string> learners, actors;
    for (const auto& [id, w] : workers_) {
      if (static_cast<int>(learners.size()) < num_learners &&
          Fits(w, LEARNER, res.learner_device(), q->footprint.learner_bytes)) {
        learners.push_back(id);
      } else if (static_cast<int>(actors.size()) < res.num_actors() &&
                 Fits(w, ACTOR, res.actor_device(), q->footprint.actor_bytes)) {
        actors.push_back(id);
      }
    }
    const int min_actors =
        res.min_actors() > 0 ? res.min_actors() : res.num_actors();
    if (static_cast<int>(learners.size()) < num_learners ||
        static_cast<int>(actors.size()) < min_actors) {
      ++q;  // Does not fit now; later runs may.
      continue;
    }
    Placement p{q->run_id, learners, actors};
    for (size_t i = 0; i < learners.size(); ++i) {
      Assign(workers_[learners[i]], q->run_id, static_cast<int>(i));
    }
    for (size_t i = 0; i < actors.size(); ++i) {
      Assign(workers_[actors[i]], q->run_id, static_cast<int>(i));
    }
    placed_[q->run_id] = {q->spec, q->footprint};
    placements.push_back(std::move(p));
    q = queue_.erase(q);
  }
  return placements;
}

std::vector<std::pair<std::string, std::string>> Scheduler::TopUpActors() {
  std::vector<std::pair<std::string, std::string>> added;
  for (const auto& [run_id, placed] : placed_) {
    const RunSpec& spec = placed.spec;
    // Actors join a run only once every learner they stream to is back
    // (after a coordinator restart, some may not have re-registered yet):
    // ranks 0 to num_learners - 1, the run's gang. An actor picks its
    // learner by its index among these addresses (actor/actor_workload.cc),
    // so a missing rank would send it to another's, or to a policy's own
    // learner (resources.learner_per_policy), which takes no stream.
    const int gang = std::max(1, spec.resources().num_learners());
    std::vector<bool> gang_back(gang, false);
    for (const auto& [id, w] : workers_) {
      if (w.run_id == run_id && w.role == LEARNER && w.rank >= 0 &&
          w.rank < gang) {
        gang_back[w.rank] = true;
      }
    }
    if (std::find(gang_back.begin(), gang_back.end(), false) !=
        gang_back.end()) {
      continue;
    }
    const double actor_bytes = placed.footprint.actor_bytes;
    std::vector<bool> rank_taken(spec.resources().num_actors(), false);
    for (const auto& [id, w] : workers_) {
      if (w.run_id == run_id && w.role == ACTOR &&
          w.rank < static_cast<int>(rank_taken.size())) {
        rank_taken[w.rank] = true;
      }
    }
    for (size_t rank = 0; rank < rank_taken.size(); ++rank) {
      if (rank_taken[rank]) continue;
      for (auto& [id, w] : workers_) {
        if (Fits(w, ACTOR, spec.resources().actor_device(), actor_bytes)) {
          Assign(w, run_id, static_cast<int>(rank));
          added.emplace_back(run_id, id);
          break;
        }
      }
    }
  }
  return added;
}

std::vector<std::string> Scheduler::Shortfalls(const QueuedRun& q,
                                               bool if_idle) const {
  const Resources& res = q.spec.resources();
  std::vector<std::string> reasons;
  auto check = [&](WorkerRole role, const std::string& device, int needed,
                   double bytes, const char* what) {
    const std::string dev = device.empty() ? "cpu" : device;
    int registered = 0, with_device = 0, fitting = 0, idle = 0;
    int64_t largest = 0;
    // Expected workers not registered yet count as they may come: idle,
    // with the device.
    std::vector<const SchedulerWorker*> pool;
    for (const auto& [id, w] : workers_) pool.push_back(&w);
    if (if_idle) {
      for (const auto& [id, w] : expected_) {
        if (workers_.count(id) == 0) pool.push_back(&w);
      }
    }
    for (const SchedulerWorker* worker : pool) {
      const SchedulerWorker& w = *worker;
      if (w.role != role) continue;
      ++registered;
      SchedulerWorker probe = w;
      probe.run_id.clear();
      const bool not_here_yet = workers_.count(w.worker_id) == 0;
      if (!not_here_yet && !Fits(probe, role, device, 0)) continue;
      ++with_device;
      largest = std::max(largest, w.memory_bytes);
      if (!not_here_yet && !Fits(probe, role, device, bytes)) continue;
      ++fitting;
      if (w.run_id.empty() || if_idle) ++idle;
    }
    if (idle >= needed) return;
    const char* known = if_idle && !expected_.empty()
                            ? " registered or expected"
                            : " registered";
    if (with_device < needed && dev != "cpu") {
      reasons.push_back(absl::StrCat("needs ", needed, " ", what, " with ", dev,
                                     ": ", with_device, " of ", registered,
                                     known, " have it"));
    } else if (fitting < needed && with_device >= needed) {
      reasons.push_back(absl::StrCat(
          "needs ", needed, " ", what, " with about ", FormatBytes(bytes),
          " of memory each: ", fitting, " of ", registered, known,
          " have enough (the largest has ", FormatBytes(largest), ")"));
    } else {
      reasons.push_back(
          if_idle ? absl::StrCat("needs ", needed, " ", what, " (", dev,
                                 "): ", registered, known, " in all")
                  : absl::StrCat("needs ", needed, " ", what, " (", dev,
                                 "): ", idle, " idle of ", registered, known));
    }
  };
  check(LEARNER, res.learner_device(), LearnerProcesses(q.spec),
        q.footprint.learner_bytes, "learners");
  check(ACTOR, res.actor_device(),
        res.min_actors() > 0 ? res.min_actors() : res.num_actors(),
        q.footprint.actor_bytes, "actors");
  return reasons;
}

std::string Scheduler::WhyWaiting(const std::string& run_id) const {
  auto q = std::find_if(queue_.begin(), queue_.end(),
                        [&](const QueuedRun& r) { return r.run_id == run_id; });
  if (q == queue_.end()) return "";
  return absl::StrJoin(Shortfalls(*q, /*if_idle=*/false), "; ");
}

void Scheduler::SetExpectedWorkers(std::vector<SchedulerWorker> expected) {
  expected_.clear();
  for (SchedulerWorker& w : expected) {
    const std::string id = w.worker_id;
    expected_[id] = std::move(w);
  }
}

std::string Scheduler::WhyNeverPlaced(const RunSpec& spec) const {
  if (expected_.empty()) return "";
  QueuedRun q;
  q.spec = spec;
  q.footprint = estimate_footprint_(spec);
  return absl::StrJoin(Shortfalls(q, /*if_idle=*/true), "; ");
}

std::string Scheduler::WhyNeverPlaced(const std::string& run_id) const {
  auto q = std::find_if(queue_.begin(), queue_.end(),
                        [&](const QueuedRun& r) { return r.run_id == run_id; });
  if (expected_.empty() || q == queue_.end()) return "";
  return absl::StrJoin(Shortfalls(*q, /*if_idle=*/true), "; ");
}

bool Scheduler::CouldEverPlace(const std::string& run_id) const {
  auto q = std::find_if(queue_.begin(), queue_.end(),
                        [&](const QueuedRun& r) { return r.run_id == run_id; });
  return q == queue_.end() || Shortfalls(*q, /*if_idle=*/true).empty();
}

std::vector<std::string> Scheduler::QueuedRuns() const {
  std::vector<std::string> ids;
  for (const QueuedRun& q : queue_) ids.push_back(q.run_id);
  return ids;
}

std::vector<std::string> Scheduler::PlacedRunsWithoutLearners() const {
  std::vector<std::string> runs;
  for (const auto& [run_id, placed] : placed_) {
    const bool has_learner =
        std::any_of(workers_.begin(), workers_.end(), [&](const auto& entry) {
          return entry.second.run_id == run_id && entry.second.role == LEARNER;
        });
    if (!has_learner) runs.push_back(run_id);
  }
  return runs;
}

const SchedulerWorker* Scheduler::worker(const std::string& worker_id) const {
  auto it = workers_.find(worker_id);
  return it == workers_.end() ? nullptr : &it->second;
}

std::vector<SchedulerWorker> Scheduler::workers() const {
  std::vector<SchedulerWorker> all;
  for (const auto& [id, w] : workers_) all.push_back(w);
  return all;
}

bool Scheduler::queued(const std::string& run_id) const {
  return std::any_of(queue_.begin(), queue_.end(),
                     [&](const QueuedRun& q) { return q.run_id == run_id; });
}

}  // namespace rl
