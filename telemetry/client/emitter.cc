#include "telemetry/client/emitter.h"

#include <time.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <random>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/backoff.h"
#include "common/logging.h"
#include "common/thread.h"
#include "telemetry/client/metric_limits.h"

namespace rl {
namespace {

int64_t CoarseWallNanos() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

uint64_t RoundUpPowerOfTwo(uint64_t n) {
  uint64_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

constexpr char kDefaultRun[] = "system";
constexpr uint64_t kWakeCheckInterval = 1024;
// A batch is sealed once its points take about this many bytes: far under
// gRPC's 4 MiB a message, whatever labels its points carry (each point is
// at most ~5.5 KiB within metric_limits.h).
constexpr size_t kBatchBytes = 1 << 20;

// Why the service would refuse a point with `labels` (sorted by key), or
// empty.
std::string LabelsProblem(const MetricLabelList& labels) {
  int distinct = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    const auto& [key, value] = labels[i];
    // Every one checked (the batch's map keeps the last of a key), each
    // key counted once.
    if (i == 0 || labels[i - 1].first != key) ++distinct;
    if (key.empty() || key.size() > kMaxLabelKeyBytes || !PrintableText(key)) {
      return absl::StrCat("label key \"", absl::CEscape(key), "\" is not 1 to ",
                          kMaxLabelKeyBytes, " printable bytes");
    }
    if (value.size() > kMaxLabelValueBytes || !PrintableText(value)) {
      return absl::StrCat("the value of label ", key, " is not 0 to ",
                          kMaxLabelValueBytes, " printable bytes");
    }
  }
  if (distinct > kMaxLabels) {
    return absl::StrCat(distinct, " labels, at most ", kMaxLabels);
  }
  return "";
}

}  // namespace

// One ring entry; two cache lines so neighbouring producers do not share.
struct alignas(64) Emitter::Slot {
  std::atomic<uint64_t> sequence{0};
  int64_t step = 0;
  int64_t wall_ns = 0;
  double value = 0;
  uint32_t labels_id = 0;
  uint32_t run_index = 0;
  uint8_t name_len = 0;
  char name[kMaxNameBytes];
};

struct Emitter::State {
  EmitterOptions options;
  std::unique_ptr<MetricTransport> transport;

  // The ring (Vyukov's bounded queue; many producers, one consumer).
  std::unique_ptr<Slot[]> slots;
  uint64_t mask = 0;
  alignas(64) std::atomic<uint64_t> enqueue_pos{0};
  alignas(64) std::atomic<uint64_t> dequeue_pos{0};  // written by the sender
  alignas(64) std::atomic<int64_t> dropped{0};
  std::atomic<uint32_t> run_index{0};
  std::atomic<uint32_t> default_labels{0};

  absl::Mutex mu;
  std::vector<std::string> runs ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<std::string, uint32_t> labels_ids ABSL_GUARDED_BY(mu);
  // Index 0: no labels. Entries are never removed (ids stay valid).
  std::deque<MetricLabelList> labels_by_id ABSL_GUARDED_BY(mu);
  // Per id: why the service would refuse a point with those labels, or
  // empty (metric_limits.h).
  std::deque<std::string> labels_problem ABSL_GUARDED_BY(mu);
  // Whether a point was dropped for its name or labels yet (logged once).
  bool logged_invalid = false;  // the sender's
  MetricLabelList default_label_list ABSL_GUARDED_BY(mu);

  std::deque<std::shared_ptr<const MetricBatch>> unacked ABSL_GUARDED_BY(mu);
  int64_t unacked_points ABSL_GUARDED_BY(mu) = 0;
  int64_t pending_points ABSL_GUARDED_BY(mu) = 0;  // drained, not sealed
  int64_t next_sequence ABSL_GUARDED_BY(mu) = 1;
  int64_t acked_sequence ABSL_GUARDED_BY(mu) = 0;
  int64_t acked_points ABSL_GUARDED_BY(mu) = 0;
  int64_t rejected_batches ABSL_GUARDED_BY(mu) = 0;
  int64_t sent_batches ABSL_GUARDED_BY(mu) = 0;
  int64_t connects ABSL_GUARDED_BY(mu) = 0;
  bool connected ABSL_GUARDED_BY(mu) = false;
  bool acked_since_connect ABSL_GUARDED_BY(mu) = false;
  int64_t generation ABSL_GUARDED_BY(mu) = 0;
  bool stop ABSL_GUARDED_BY(mu) = false;
  int flush_requests ABSL_GUARDED_BY(mu) = 0;
  // Set by a producer that finds the ring over half full (checked once per
  // kWakeCheckInterval points), so a sleeping sender drains a burst in time.
  bool wake_requested ABSL_GUARDED_BY(mu) = false;

  NamedThread sender;
  NamedThread ack_reader;  // owned by the sender thread
};

Emitter::Emitter(std::unique_ptr<MetricTransport> transport,
                 EmitterOptions options)
    : enabled_(transport != nullptr), state_(std::make_unique<State>()) {
  State& s = *state_;
  if (options.incarnation == 0) {
    std::random_device rd;
    options.incarnation =
        static_cast<int64_t>((uint64_t{rd()} << 31) ^ rd()) & 0x7fffffffffff;
    if (options.incarnation == 0) options.incarnation = 1;
  }
  options.batch_max_points = std::max(1, options.batch_max_points);
  s.options = std::move(options);
  s.transport = std::move(transport);
  {
    absl::MutexLock lock(&s.mu);
    s.runs.push_back(kDefaultRun);
    s.labels_by_id.emplace_back();
    s.labels_problem.emplace_back();
  }
  if (!enabled_) return;
  const uint64_t capacity =
      RoundUpPowerOfTwo(std::max(2, s.options.queue_capacity));
  s.slots.reset(new Slot[capacity]);
  s.mask = capacity - 1;
  for (uint64_t i = 0; i < capacity; ++i) {
    s.slots[i].sequence.store(i, std::memory_order_relaxed);
  }
  s.sender = StartThread("emitter-send", [this] { SenderLoop(); });
}

Emitter::~Emitter() {
  State& s = *state_;
  {
    absl::MutexLock lock(&s.mu);
    s.stop = true;
  }
  // A send blocked on a hung service (flow control) must not hold up the
  // shutdown: cancel the stream, then join.
  if (s.transport != nullptr) s.transport->Close();
  if (s.sender.joinable()) s.sender.join();
}

int64_t Emitter::InternRunLocked(const std::string& run_id) {
  State& s = *state_;
  for (size_t i = 0; i < s.runs.size(); ++i) {
    if (s.runs[i] == run_id) return static_cast<int64_t>(i);
  }
  if (s.runs.size() >= kMaxRuns) return -1;
  s.runs.push_back(run_id);
  return static_cast<int64_t>(s.runs.size() - 1);
}

void Emitter::SetRun(absl::string_view run_id) {
  State& s = *state_;
  absl::MutexLock lock(&s.mu);
  const int64_t index =
      InternRunLocked(run_id.empty() ? kDefaultRun : std::string(run_id));
  // Past kMaxRuns the points go to the last run set.
  if (index >= 0) {
    s.run_index.store(static_cast<uint32_t>(index), std::memory_order_relaxed);
  }
}

void Emitter::EmitToRun(absl::string_view run_id, absl::string_view name,
                        int64_t step, double value) {
  if (!enabled_) return;
  State& s = *state_;
  int64_t index;
  {
    absl::MutexLock lock(&s.mu);
    index = InternRunLocked(run_id.empty() ? kDefaultRun : std::string(run_id));
  }
  if (index < 0) {
    s.dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  EmitInternal(name, step, value,
               s.default_labels.load(std::memory_order_relaxed), index);
}

void Emitter::SetDefaultLabels(const MetricLabelList& labels) {
  if (!enabled_) return;
  const uint32_t id = labels.empty() ? 0 : InternLabels(labels);
  State& s = *state_;
  absl::MutexLock lock(&s.mu);
  s.default_label_list = labels;
  s.default_labels.store(id, std::memory_order_relaxed);
}

void Emitter::Emit(absl::string_view name, int64_t step, double value) {
  if (!enabled_) return;
  EmitInternal(name, step, value,
               state_->default_labels.load(std::memory_order_relaxed));
}

void Emitter::Emit(absl::string_view name, int64_t step, double value,
                   const MetricLabelList& labels) {
  if (!enabled_) return;
  if (labels.empty()) return Emit(name, step, value);
  MetricLabelList all = labels;
  {
    absl::MutexLock lock(&state_->mu);
    for (const auto& label : state_->default_label_list) {
      const bool given =
          std::any_of(all.begin(), all.end(),
                      [&](const auto& l) { return l.first == label.first; });
      if (!given) all.push_back(label);
    }
  }
  EmitInternal(name, step, value, InternLabels(all));
}

uint32_t Emitter::InternLabels(const MetricLabelList& labels) {
  MetricLabelList sorted = labels;
  std::sort(sorted.begin(), sorted.end());
  std::string key;
  for (const auto& [k, v] : sorted) absl::StrAppend(&key, k, "\x1f", v, "\x1e");
  State& s = *state_;
  absl::MutexLock lock(&s.mu);
  auto [it, inserted] = s.labels_ids.try_emplace(
      key, static_cast<uint32_t>(s.labels_by_id.size()));
  if (inserted) {
    s.labels_problem.push_back(LabelsProblem(sorted));
    s.labels_by_id.push_back(std::move(sorted));
  }
  return it->second;
}

void Emitter::EmitInternal(absl::string_view name, int64_t step, double value,
                           uint32_t labels_id, int64_t run_index) {
  State& s = *state_;
  if (name.empty() || name.size() > kMaxNameBytes) {
    s.dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  uint64_t pos = s.enqueue_pos.load(std::memory_order_relaxed);
  Slot* slot;
  for (;;) {
    slot = &s.slots[pos & s.mask];
    const uint64_t seq = slot->sequence.load(std::memory_order_acquire);
    const int64_t dif = static_cast<int64_t>(seq - pos);
    if (dif == 0) {
      if (s.enqueue_pos.compare_exchange_weak(pos, pos + 1,
                                              std::memory_order_relaxed)) {
        break;
      }
    } else if (dif < 0) {
      s.dropped.fetch_add(1, std::memory_order_relaxed);  // full
      return;
    } else {
      pos = s.enqueue_pos.load(std::memory_order_relaxed);
    }
  }
  slot->step = step;
  slot->wall_ns = CoarseWallNanos();
  slot->value = value;
  slot->labels_id = labels_id;
  slot->run_index = run_index >= 0
                        ? static_cast<uint32_t>(run_index)
                        : s.run_index.load(std::memory_order_relaxed);
  slot->name_len = static_cast<uint8_t>(name.size());
  std::memcpy(slot->name, name.data(), name.size());
  slot->sequence.store(pos + 1, std::memory_order_release);
  if ((pos & (kWakeCheckInterval - 1)) == 0 &&
      pos - s.dequeue_pos.load(std::memory_order_relaxed) > s.mask / 2) {
    absl::MutexLock lock(&s.mu);  // rare: re-evaluates the sender's wait
    s.wake_requested = true;
  }
  // The next producer's slot, most likely last touched by the sender on the
  // other core: start fetching it for writing now.
  __builtin_prefetch(&s.slots[(pos + 1) & s.mask], 1, 3);
  __builtin_prefetch(
      reinterpret_cast<const char*>(&s.slots[(pos + 1) & s.mask]) + 64, 1, 3);
}

EmitterStats Emitter::stats() const {
  State& s = *state_;
  EmitterStats out;
  out.emitted =
      static_cast<int64_t>(s.enqueue_pos.load(std::memory_order_relaxed));
  out.dropped = s.dropped.load(std::memory_order_relaxed);
  absl::MutexLock lock(&s.mu);
  out.sent_batches = s.sent_batches;
  out.acked_points = s.acked_points;
  out.rejected_batches = s.rejected_batches;
  out.unacked_points = s.unacked_points;
  out.acked_sequence_number = s.acked_sequence;
  out.connects = s.connects;
  out.connected = s.connected;
  return out;
}

absl::Status Emitter::Flush(absl::Duration timeout) {
  if (!enabled_) return absl::OkStatus();
  State& s = *state_;
  const uint64_t target = s.enqueue_pos.load(std::memory_order_acquire);
  absl::MutexLock lock(&s.mu);
  ++s.flush_requests;
  auto done = [&s, target]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
    return s.stop || (s.dequeue_pos.load(std::memory_order_acquire) >= target &&
                      s.pending_points == 0 && s.unacked_points == 0);
  };
  const bool ok = s.mu.AwaitWithTimeout(absl::Condition(&done), timeout);
  --s.flush_requests;
  if (ok) return absl::OkStatus();
  const int64_t queued = static_cast<int64_t>(
      target - std::min(target, s.dequeue_pos.load(std::memory_order_acquire)));
  return absl::DeadlineExceededError(absl::StrCat(
      "telemetry flush: ", s.unacked_points + s.pending_points + queued,
      " points not acknowledged after ", absl::FormatDuration(timeout),
      s.connected ? "" : " (not connected to the telemetry service)"));
}

void Emitter::AckLoop(int64_t generation) {
  State& s = *state_;
  for (;;) {
    absl::StatusOr<int64_t> ack = s.transport->ReadAck();
    absl::MutexLock lock(&s.mu);
    if (!ack.ok()) {
      if (s.generation == generation) {
        s.connected = false;
        // Refused for good: malformed (INVALID_ARGUMENT), or beyond the
        // store's runs or series (FAILED_PRECONDITION). Anything else
        // (UNAVAILABLE, RESOURCE_EXHAUSTED for the ingest budget that all
        // streams share) passes: the batch is resent.
        const absl::StatusCode code = ack.status().code();
        if ((code == absl::StatusCode::kInvalidArgument ||
             code == absl::StatusCode::kFailedPrecondition) &&
            !s.unacked.empty()) {
          // The service refused the oldest unacknowledged batch (everything
          // before it was acknowledged first): drop it, never resend it.
          const auto& bad = s.unacked.front();
          RL_LOG_ERROR("telemetry: batch {} ({} points) rejected: {}",
                       bad->sequence_number(), bad->points_size(),
                       ack.status().ToString());
          s.dropped.fetch_add(bad->points_size(), std::memory_order_relaxed);
          ++s.rejected_batches;
          s.unacked_points -= bad->points_size();
          s.unacked.pop_front();
        }
      }
      return;
    }
    s.acked_sequence = std::max(s.acked_sequence, *ack);
    s.acked_since_connect = true;
    while (!s.unacked.empty() &&
           s.unacked.front()->sequence_number() <= s.acked_sequence) {
      s.unacked_points -= s.unacked.front()->points_size();
      s.acked_points += s.unacked.front()->points_size();
      s.unacked.pop_front();
    }
  }
}

void Emitter::SenderLoop() {
  State& s = *state_;
  const EmitterOptions& o = s.options;
  Backoff::Options backoff_options;
  backoff_options.initial = o.min_backoff;
  backoff_options.max = o.max_backoff;
  backoff_options.min_jitter = 0.5;
  backoff_options.max_jitter = 1.0;
  backoff_options.seed = static_cast<uint64_t>(o.incarnation) | 1;
  Backoff backoff(backoff_options);
  absl::Time next_connect = absl::InfinitePast();
  absl::Time first_pending = absl::InfiniteFuture();
  // The batch being filled, per run.
  std::shared_ptr<MetricBatch> open;
  uint32_t open_run = 0;
  size_t open_bytes = 0;  // about what its points take
  // How long an idle sender sleeps: a wake-up preempts whatever runs on
  // that core (an OpenMP team waits for its slowest thread), so few of them.
  const absl::Duration poll = std::clamp(
      o.batch_interval / 4, absl::Milliseconds(1), absl::Milliseconds(250));

  auto disconnect = [&]() {
    s.transport->Close();
    if (s.ack_reader.joinable()) s.ack_reader.join();
    absl::MutexLock lock(&s.mu);
    s.connected = false;
  };
  // Sends `batch` if connected; a failed send drops the connection (the
  // batch stays unacknowledged and is resent after the reconnect).
  auto send = [&](const MetricBatch& batch) {
    {
      absl::MutexLock lock(&s.mu);
      if (!s.connected) return;
      ++s.sent_batches;
    }
    if (!s.transport->Send(batch)) {
      absl::MutexLock lock(&s.mu);
      s.connected = false;
    }
  };
  auto seal = [&]() {
    if (!open || open->points_size() == 0) return;
    std::shared_ptr<const MetricBatch> batch;
    {
      absl::MutexLock lock(&s.mu);
      open->set_sequence_number(s.next_sequence++);
      open->set_run_id(s.runs[open_run]);
      open->set_source(o.source);
      open->set_incarnation(o.incarnation);
      open->set_dropped_points(s.dropped.load(std::memory_order_relaxed));
      s.pending_points = 0;
      s.unacked_points += open->points_size();
      batch = std::move(open);
      s.unacked.push_back(batch);
    }
    open.reset();
    first_pending = absl::InfiniteFuture();
    send(*batch);
  };

  for (;;) {
    bool stop, connected, flush;
    int64_t budget;
    {
      absl::MutexLock lock(&s.mu);
      stop = s.stop;
      connected = s.connected;
      flush = s.flush_requests > 0;
      budget = o.max_unacked_points - s.unacked_points - s.pending_points;
    }
    if (stop) break;
    const absl::Time now = absl::Now();

    if (!connected && now >= next_connect) {
      disconnect();  // join the previous ack reader
      if (absl::Status st = s.transport->Connect(); st.ok()) {
        int64_t generation;
        std::vector<std::shared_ptr<const MetricBatch>> resend;
        {
          absl::MutexLock lock(&s.mu);
          s.connected = true;
          generation = ++s.generation;
          ++s.connects;
          resend.assign(s.unacked.begin(), s.unacked.end());
        }
        s.ack_reader = StartThread("emitter-acks",
                                   [this, generation] { AckLoop(generation); });
        for (const auto& batch : resend) send(*batch);
      }
      // The next attempt (if this connection fails) waits; the backoff is
      // reset once the service acknowledges something.
      next_connect = now + backoff.Next();
    }
    {
      absl::MutexLock lock(&s.mu);
      if (s.acked_since_connect) {
        s.acked_since_connect = false;
        backoff.Reset();
      }
    }

    // Drain the ring within the unacknowledged-points budget.
    int64_t drained = 0;
    uint64_t pos = s.dequeue_pos.load(std::memory_order_relaxed);
    while (drained < budget) {
      Slot& slot = s.slots[pos & s.mask];
      if (slot.sequence.load(std::memory_order_acquire) != pos + 1) break;
      const std::string name(slot.name, slot.name_len);
      const int64_t step = slot.step, wall_ns = slot.wall_ns;
      const double value = slot.value;
      const uint32_t labels_id = slot.labels_id, run_index = slot.run_index;
      slot.sequence.store(pos + s.mask + 1, std::memory_order_release);
      ++pos;
      ++drained;
      // A point the service would refuse is dropped here, alone: in a batch
      // it would have the whole batch refused.
      MetricLabelList labels;
      std::string problem;
      if (!PrintableText(name)) {
        problem = "the name has control characters";
      } else if (labels_id != 0) {
        absl::MutexLock lock(&s.mu);
        problem = s.labels_problem[labels_id];
        if (problem.empty()) labels = s.labels_by_id[labels_id];
      }
      if (!problem.empty()) {
        s.dropped.fetch_add(1, std::memory_order_relaxed);
        if (!s.logged_invalid) {
          s.logged_invalid = true;
          RL_LOG_WARNING(
              "telemetry: point {} dropped: {} (such points are dropped and "
              "counted in telemetry/dropped_points; logged once)",
              absl::CEscape(name), problem);
        }
        continue;
      }
      if (open && run_index != open_run) seal();
      if (!open) {
        open = std::make_shared<MetricBatch>();
        open_run = run_index;
        open_bytes = 0;
        first_pending = now;
      }
      MetricPoint* p = open->add_points();
      p->set_name(name);
      p->set_step(step);
      p->set_wall_time_ns(wall_ns);
      p->set_value(value);
      open_bytes += name.size() + 32;
      for (auto& [k, v] : labels) {
        open_bytes += k.size() + v.size() + 8;
        (*p->mutable_labels())[k] = std::move(v);
      }
      if (open->points_size() >= o.batch_max_points ||
          open_bytes >= kBatchBytes) {
        seal();
      }
    }
    if (drained > 0) {
      // Published together with pending_points, under the lock: Flush must
      // never see the points as dequeued before they count as pending.
      absl::MutexLock lock(&s.mu);
      s.dequeue_pos.store(pos, std::memory_order_release);
      s.pending_points = open ? open->points_size() : 0;
    }
    if (open && (flush || now - first_pending >= o.batch_interval)) seal();

    if (drained == 0) {
      absl::MutexLock lock(&s.mu);
      auto wake = [&s]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
        return s.stop || s.flush_requests > 0 || s.wake_requested;
      };
      if (!flush)
        s.mu.AwaitWithTimeout(absl::Condition(&wake), poll);
      else
        s.mu.AwaitWithTimeout(absl::Condition(&s.stop), absl::Milliseconds(1));
      s.wake_requested = false;
    }
  }
  disconnect();
}

}  // namespace rl
