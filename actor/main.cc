// actor_main: one actor of a run. Steps the run's environments with the
// newest policy from the learner and streams rollout segments to it.
//
//   actor_main --learner=127.0.0.1:50051 --run=examples/cartpole.yaml
//
// Exit codes: 0 the learner sent its final policy, or SIGTERM/SIGINT;
// 2 bad flags or run file; 1 other errors (e.g. the learner unreachable for
// longer than --max_disconnected_seconds).
#include <signal.h>
#include <torch/torch.h>

#include <atomic>
#include <cstdio>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "actor/actor_client.h"
#include "common/logging.h"
#include "common/run_spec.h"
#include "coordinator/worker_agent.h"
#include "telemetry/process_telemetry.h"

ABSL_FLAG(std::string, learner, "", "Learner address HOST:PORT (required).");
ABSL_FLAG(std::string, run, "", "Run file, YAML or JSON (required).");
ABSL_FLAG(std::string, run_id, "",
          "Run id sent to the learner (default: the run file's name).");
ABSL_FLAG(int, actor_id, 0, "Rank of this actor in the run (>= 0).");
ABSL_FLAG(int, env_threads, 1, "Threads stepping the environments.");
ABSL_FLAG(int, torch_threads, 1, "LibTorch intra-op threads.");
ABSL_FLAG(std::string, coordinator, "",
          "Worker mode: register with this coordinator (HOST:PORT) and run "
          "the assignments it gives (no --learner/--run needed).");
ABSL_FLAG(std::string, worker_name, "",
          "Worker mode: stable name (default actor-<pid>).");
ABSL_FLAG(int, max_disconnected_seconds, 120,
          "Exit with an error after this long without a learner connection.");

namespace rl {
namespace {

int BadInput(const std::string& message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  return 2;
}

// absl::ParseCommandLine exits with 1 on an unknown flag or a bad value; this
// program promises 2 for bad flags, so it checks them first. Returns the
// problem, or "" if every flag is known and parses.
std::string CheckFlags(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") break;
    if (!absl::ConsumePrefix(&arg, "--") && !absl::ConsumePrefix(&arg, "-")) {
      continue;  // positional; reported after parsing
    }
    const size_t eq = arg.find('=');
    const absl::string_view name = arg.substr(0, eq);
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr) {
      absl::string_view negated = name;
      if (absl::ConsumePrefix(&negated, "no") &&
          eq == absl::string_view::npos) {
        absl::CommandLineFlag* bool_flag = absl::FindCommandLineFlag(negated);
        if (bool_flag != nullptr && bool_flag->IsOfType<bool>()) continue;
      }
      return absl::StrCat("unknown flag --", name);
    }
    if (flag->Filename().find("actor/main.cc") == std::string::npos) {
      continue;  // absl's own flags (--help, --flagfile, ...)
    }
    std::string value;
    if (eq != absl::string_view::npos) {
      value = std::string(arg.substr(eq + 1));
    } else if (flag->IsOfType<bool>()) {
      continue;
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return absl::StrCat("--", name, ": missing value");
    }
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      return absl::StrCat("--", name, ": ", error);
    }
  }
  return "";
}

// Stops `client` on SIGTERM/SIGINT. The signals are blocked in every thread
// (the mask is set before any thread starts) and taken here with
// sigtimedwait, so Stop() runs in a normal thread, not a signal handler.
class SignalWatcher {
 public:
  explicit SignalWatcher(ActorClient* client)
      : thread_([this, client] { Watch(client); }) {}
  ~SignalWatcher() {
    done_ = true;
    thread_.join();
  }

  static void BlockSignals() {
    sigset_t set = Signals();
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
  }

 private:
  static sigset_t Signals() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    return set;
  }

  void Watch(ActorClient* client) {
    const sigset_t set = Signals();
    const timespec poll = {0, 200 * 1000 * 1000};
    while (!done_) {
      const int signal = sigtimedwait(&set, nullptr, &poll);
      if (signal == SIGTERM || signal == SIGINT) {
        RL_LOG_INFO("{}: stopping at the next segment boundary",
                    signal == SIGTERM ? "SIGTERM" : "SIGINT");
        client->Stop();
      }
    }
  }

  std::atomic<bool> done_{false};
  std::thread thread_;
};

// Worker mode: one ActorClient per assignment from the coordinator; a new
// assignment stops the old client first.
int WorkerMain() {
  InitLogging("actor");
  SignalWatcher::BlockSignals();
  torch::set_num_threads(absl::GetFlag(FLAGS_torch_threads));
  absl::Mutex mu;
  Assignment desired;
  bool changed = false;
  WorkerAgentOptions agent_options;
  agent_options.coordinator = absl::GetFlag(FLAGS_coordinator);
  agent_options.role = ACTOR;
  agent_options.worker_name = absl::GetFlag(FLAGS_worker_name).empty()
                                  ? absl::StrCat("actor-", getpid())
                                  : absl::GetFlag(FLAGS_worker_name);
  auto telemetry = ProcessTelemetry::StartFromFlags(agent_options.worker_name);
  if (!telemetry.ok()) {
    RL_LOG_ERROR("{}", telemetry.status().ToString());
    return 1;
  }
  WorkerAgent agent(agent_options, [&](const Assignment& assignment) {
    absl::MutexLock lock(&mu);
    desired = assignment;
    changed = true;
  });
  agent.Start();

  std::unique_ptr<ActorClient> client;
  std::thread runner;
  auto stop_client = [&]() {
    if (client != nullptr) client->Stop();
    if (runner.joinable()) runner.join();
    client.reset();
  };
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  const timespec poll = {0, 100 * 1000 * 1000};
  while (true) {
    const int signal = sigtimedwait(&signals, nullptr, &poll);
    if (signal == SIGTERM || signal == SIGINT) break;
    Assignment assignment;
    {
      absl::MutexLock lock(&mu);
      if (!changed) continue;
      changed = false;
      assignment = desired;
    }
    stop_client();
    if (assignment.run_id().empty() || assignment.learner_addresses().empty()) {
      RL_LOG_INFO("idle");
      continue;
    }
    ActorOptions options;
    options.learner_address = assignment.learner_addresses(0);
    options.spec = assignment.spec();
    options.run_id = assignment.run_id();
    options.actor_id = assignment.rank();
    options.env_threads = absl::GetFlag(FLAGS_env_threads);
    options.max_disconnected =
        absl::Seconds(absl::GetFlag(FLAGS_max_disconnected_seconds));
    options.emitter = (*telemetry)->emitter();
    options.emitter->SetRun(assignment.run_id());
    auto created = ActorClient::Create(options);
    if (!created.ok()) {
      RL_LOG_ERROR("assignment {}: {}", assignment.assignment_id(),
                   created.status().ToString());
      continue;
    }
    RL_LOG_INFO("actor {} of run {} (learner {})", assignment.rank(),
                assignment.run_id(), options.learner_address);
    client = std::move(*created);
    runner = std::thread([c = client.get()] {
      const absl::Status status = c->Run();
      if (!status.ok()) RL_LOG_WARNING("actor ended: {}", status.ToString());
    });
  }
  stop_client();
  agent.Stop();
  return 0;
}

int Main() {
  if (!absl::GetFlag(FLAGS_coordinator).empty()) return WorkerMain();
  const std::string learner = absl::GetFlag(FLAGS_learner);
  const std::string run = absl::GetFlag(FLAGS_run);
  const int actor_id = absl::GetFlag(FLAGS_actor_id);
  if (learner.empty()) return BadInput("--learner is required (HOST:PORT)");
  if (learner.find(':') == std::string::npos) {
    return BadInput(
        absl::StrCat("--learner: expected HOST:PORT (got \"", learner, "\")"));
  }
  if (run.empty()) return BadInput("--run is required (a run file)");
  if (actor_id < 0) {
    return BadInput(
        absl::StrCat("--actor_id: must be >= 0 (got ", actor_id, ")"));
  }
  if (absl::GetFlag(FLAGS_env_threads) < 1) {
    return BadInput(absl::StrCat("--env_threads: must be >= 1 (got ",
                                 absl::GetFlag(FLAGS_env_threads), ")"));
  }
  if (absl::GetFlag(FLAGS_torch_threads) < 1) {
    return BadInput(absl::StrCat("--torch_threads: must be >= 1 (got ",
                                 absl::GetFlag(FLAGS_torch_threads), ")"));
  }
  if (absl::GetFlag(FLAGS_max_disconnected_seconds) < 1) {
    return BadInput(
        absl::StrCat("--max_disconnected_seconds: must be >= 1 (got ",
                     absl::GetFlag(FLAGS_max_disconnected_seconds), ")"));
  }
  InitLogging(absl::StrCat("actor/", actor_id));
  // Before any thread starts, so that every thread inherits the mask.
  SignalWatcher::BlockSignals();

  absl::StatusOr<RunSpec> spec = LoadRunSpecFile(run);
  if (!spec.ok()) {
    return BadInput(absl::StrCat(run, ": ", spec.status().message()));
  }
  torch::set_num_threads(absl::GetFlag(FLAGS_torch_threads));
  auto telemetry =
      ProcessTelemetry::StartFromFlags(absl::StrCat("actor/", actor_id));
  if (!telemetry.ok()) {
    RL_LOG_ERROR("{}", telemetry.status().ToString());
    return 1;
  }

  ActorOptions options;
  options.learner_address = learner;
  options.spec = *spec;
  options.run_id = absl::GetFlag(FLAGS_run_id);
  options.actor_id = actor_id;
  options.env_threads = absl::GetFlag(FLAGS_env_threads);
  options.max_disconnected =
      absl::Seconds(absl::GetFlag(FLAGS_max_disconnected_seconds));
  options.emitter = (*telemetry)->emitter();
  options.emitter->SetRun(options.run_id.empty() ? spec->name()
                                                 : options.run_id);
  absl::StatusOr<std::unique_ptr<ActorClient>> client =
      ActorClient::Create(options);
  if (!client.ok()) {
    if (client.status().code() == absl::StatusCode::kInvalidArgument) {
      return BadInput(std::string(client.status().message()));
    }
    RL_LOG_ERROR("{}", client.status().ToString());
    return 1;
  }

  absl::Status status;
  {
    SignalWatcher watcher(client->get());
    status = (*client)->Run();
  }
  if (!status.ok()) {
    RL_LOG_ERROR("{}", status.ToString());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace rl

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "actor_main --learner=HOST:PORT --run=RUN_FILE [--actor_id=N] "
      "[--env_threads=N] [--torch_threads=N] [--max_disconnected_seconds=S]");
  const std::string bad_flag = rl::CheckFlags(argc, argv);
  if (!bad_flag.empty()) return rl::BadInput(bad_flag);
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() != 1) {
    std::fprintf(stderr, "error: unexpected argument \"%s\"\n", args[1]);
    return 2;
  }
  return rl::Main();
}
