#include "worker/worker_agent.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <random>

#include "common/grpc_status.h"
#include "common/grpc_util.h"
#include "common/logging.h"
#include "common/status.h"

namespace rl {

std::vector<DeviceCheck> DeviceChecksOf(
    const std::vector<std::pair<std::string, absl::Status>>& checks) {
  std::vector<DeviceCheck> out;
  for (const auto& [check, status] : checks) {
    DeviceCheck& c = out.emplace_back();
    c.set_check(check);
    c.set_passed(status.ok());
    c.set_detail(std::string(status.message()));
  }
  return out;
}

int64_t HostMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  int64_t bytes =
      pages > 0 && page_size > 0 ? static_cast<int64_t>(pages) * page_size : 0;
  for (const char* path : {"/sys/fs/cgroup/memory.max",
                           "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream in(path);
    int64_t limit = 0;
    // "max" (no limit) fails to parse and is skipped.
    if (in >> limit && limit > 0 && (bytes == 0 || limit < bytes)) {
      bytes = limit;
    }
  }
  return bytes;
}

WorkerAgent::WorkerAgent(const WorkerAgentOptions& options,
                         std::function<void(const Assignment&)> on_assignment)
    : options_(options),
      on_assignment_(std::move(on_assignment)),
      stub_(WorkerService::NewStub(
          options.channel != nullptr
              ? options.channel
              : CreateChannel(options.coordinator, options.security))) {}

WorkerAgent::~WorkerAgent() {
  Stop();
  if (thread_.joinable()) thread_.join();
}

void WorkerAgent::Start() {
  thread_ = StartThread("worker-beat", [this] { Loop(); });
}

void WorkerAgent::Stop() {
  absl::MutexLock lock(&mu_);
  stop_ = true;
}

absl::Status WorkerAgent::Report(const std::optional<RunProgress>& progress,
                                 bool finished, const absl::Status& status,
                                 std::optional<int64_t> assignment_id) {
  ReportStatusRequest request;
  {
    absl::MutexLock lock(&mu_);
    request.set_worker_id(worker_id_);
    request.set_worker_key(worker_key_);
    request.set_assignment_id(
        assignment_id.has_value() ? *assignment_id : current_.assignment_id());
  }
  if (progress.has_value()) *request.mutable_progress() = *progress;
  request.set_finished(finished);
  if (!status.ok()) {
    request.set_error(std::string(status.message()));
    request.set_retryable(status.code() == absl::StatusCode::kAborted);
    request.set_fatal(IsRunFatal(status));
  }
  ReportStatusResponse response;
  auto context = ContextWithDeadline(absl::Seconds(5));
  return FromGrpcStatus(stub_->ReportStatus(context.get(), request, &response));
}

void WorkerAgent::Loop() {
  std::mt19937 rng(std::random_device{}());
  absl::Duration backoff = absl::Milliseconds(100);
  int64_t epoch = 0;
  absl::Duration interval = absl::Seconds(1);
  bool registered = false;
  auto stopping = [this]() {
    absl::MutexLock lock(&mu_);
    return stop_;
  };
  auto wait = [&](absl::Duration d) {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&stop_), d);
  };
  while (!stopping()) {
    if (!registered) {
      RegisterWorkerRequest request;
      request.set_worker_name(options_.worker_name);
      request.mutable_capabilities()->set_role(options_.role);
      for (const auto& d : options_.devices) {
        request.mutable_capabilities()->add_devices(d);
      }
      request.mutable_capabilities()->set_memory_bytes(
          options_.memory_bytes > 0 ? options_.memory_bytes
                                    : HostMemoryBytes());
      request.set_address(options_.address);
      request.set_rendezvous_address(options_.rendezvous_address);
      {
        absl::MutexLock lock(&mu_);
        *request.mutable_current_assignment() = current_;
        request.set_worker_key(worker_key_);
      }
      request.set_worker_credential(options_.credential);
      RegisterWorkerResponse response;
      auto context = ContextWithDeadline(absl::Seconds(5));
      const grpc::Status status =
          stub_->RegisterWorker(context.get(), request, &response);
      if (!status.ok()) {
        RL_LOG_WARNING("cannot register with the coordinator at {}: {}",
                       options_.coordinator, status.error_message());
        const double jitter = std::uniform_real_distribution<>(0.8, 1.2)(rng);
        wait(backoff * jitter);
        backoff = std::min(backoff * 2, absl::Seconds(5));
        continue;
      }
      backoff = absl::Milliseconds(100);
      registered = true;
      epoch = response.lease().epoch();
      // Heartbeats also deliver assignments, so they are frequent (at most
      // 0.5 s apart) to keep the time from submit to work short; a third of
      // the TTL when that is shorter.
      interval = absl::Seconds(
          std::clamp(response.lease().ttl_seconds() / 3, 0.05, 0.5));
      absl::MutexLock lock(&mu_);
      worker_id_ = response.worker_id();
      worker_key_ = response.worker_key();
    }
    HeartbeatRequest request;
    {
      absl::MutexLock lock(&mu_);
      request.set_worker_id(worker_id_);
      request.set_worker_key(worker_key_);
      request.set_running_assignment_id(current_.assignment_id());
    }
    request.set_lease_epoch(epoch);
    if (options_.device_checks) {
      for (DeviceCheck& check : options_.device_checks()) {
        *request.add_device_checks() = std::move(check);
      }
    }
    HeartbeatResponse response;
    auto context = ContextWithDeadline(absl::Seconds(5));
    const grpc::Status status =
        stub_->Heartbeat(context.get(), request, &response);
    // PERMISSION_DENIED: the coordinator no longer knows this key (its
    // secret was replaced); registering again gets the current one.
    if (status.error_code() == grpc::StatusCode::NOT_FOUND ||
        status.error_code() == grpc::StatusCode::FAILED_PRECONDITION ||
        status.error_code() == grpc::StatusCode::PERMISSION_DENIED) {
      RL_LOG_WARNING("lease lost ({}); registering again",
                     status.error_message());
      registered = false;
      continue;
    }
    if (status.ok()) {
      bool changed;
      {
        absl::MutexLock lock(&mu_);
        changed =
            response.assignment().assignment_id() != current_.assignment_id();
        if (changed) current_ = response.assignment();
      }
      if (changed) on_assignment_(response.assignment());
    } else {
      RL_LOG_WARNING("heartbeat failed: {}", status.error_message());
    }
    wait(interval);
  }
}

}  // namespace rl
