// A MetricBatch from a peer -> TelemetryCore::Submit, in-process (no gRPC):
// validation, the ingest budget, the SQLite store and the TensorBoard event
// files, then a query of what was stored. One core (store and event files in
// a scratch directory) for the whole process.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "fuzz/fuzz_input.h"
#include "proto/telemetry.pb.h"
#include "telemetry/telemetry_core.h"

namespace {

rl::TelemetryCore* MakeCore() {
  const std::string dir = rl::MakeFuzzDir("telemetry");
  rl::TelemetryCoreOptions options;
  options.store_path = dir + "/telemetry.db";
  options.tensorboard_dir = dir + "/tensorboard";
  auto core = rl::TelemetryCore::Create(options);
  if (!core.ok()) {
    std::fprintf(stderr, "%s\n", core.status().ToString().c_str());
    std::abort();
  }
  return core->release();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static rl::TelemetryCore* core = MakeCore();
  auto batch = std::make_shared<rl::MetricBatch>();
  if (!rl::ParseFuzzInput(data, size, batch.get())) return 0;
  // Stored before the next input, so a finding is this input's.
  auto stored = std::make_shared<absl::Notification>();
  const absl::Status submitted =
      core->Submit(batch, [stored](absl::Status) { stored->Notify(); });
  // RL_FUZZ_VERBOSE=1 with input files: why a batch was refused.
  if (std::getenv("RL_FUZZ_VERBOSE") != nullptr) {
    std::fprintf(stderr, "%s\n", submitted.ToString().c_str());
  }
  if (!submitted.ok()) return 0;
  if (!stored->WaitForNotificationWithTimeout(absl::Seconds(60))) {
    std::fprintf(stderr, "batch not stored within 60 s\n");
    std::abort();
  }
  rl::QueryRequest query;
  query.set_run_id(batch->run_id());
  if (batch->points_size() > 0) query.add_names(batch->points(0).name());
  core->Query(query).IgnoreError();
  return 0;
}
