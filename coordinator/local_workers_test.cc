#include "coordinator/local_workers.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

TEST(LocalWorkersTest, ParsesCountsAndGpus) {
  LocalWorkerOptions o;
  ASSERT_OK(ParseLocalWorkers("learners=3,actors=2,gpus=2", &o));
  EXPECT_EQ(o.learners, 3);
  EXPECT_EQ(o.actors, 2);
  EXPECT_EQ(o.gpu_ids, std::vector<std::string>({"0", "1"}));
  EXPECT_THAT(ParseLocalWorkers("gpus=x", &o),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("expected learners=N,actors=M[,gpus=G] with "
                                 "N, M, G in [0, 64] (got \"gpus=x\")")));
  EXPECT_THAT(ParseLocalWorkers("tpus=1", &o),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("unknown kind \"tpus\" (learners, actors, "
                                 "gpus)")));
}

// The log's first line, once it has one (a worker writes it at start).
std::string FirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// What each worker of a pool made with `spec` saw as CUDA_VISIBLE_DEVICES
// (a script stands in for the workers' binaries), by worker name.
std::map<std::string, std::string> VisibleDevices(const std::string& spec) {
  const std::string dir = MakeTestDir();
  const std::string script = dir + "/worker.sh";
  {
    std::ofstream out(script);
    out << "#!/bin/sh\necho \"[$CUDA_VISIBLE_DEVICES]\"\nexec sleep 60\n";
  }
  ::chmod(script.c_str(), 0755);
  LocalWorkerOptions options;
  EXPECT_OK(ParseLocalWorkers(spec, &options));
  options.learner_binary = script;
  options.actor_binary = script;
  options.coordinator_address = "127.0.0.1:1";
  options.log_dir = dir + "/logs";
  std::map<std::string, std::string> seen;
  LocalWorkerPool pool(options);
  pool.Supervise();
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  const int workers = options.learners + options.actors;
  while (static_cast<int>(seen.size()) < workers && absl::Now() < deadline) {
    for (WorkerRole role : {LEARNER, ACTOR}) {
      for (const std::string& name : LocalWorkerNames(options, role)) {
        const std::string line =
            FirstLine(options.log_dir + "/" + name + ".log");
        if (!line.empty()) seen[name] = line;
      }
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  pool.Shutdown();
  return seen;
}

// gpus=G: learner i and actor i each see GPU i mod G alone, of those the
// coordinator may use; without it they see what the coordinator sees.
TEST(LocalWorkersTest, EachWorkerSeesTheGpuItIsGiven) {
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  EXPECT_EQ(VisibleDevices("learners=3,actors=2,gpus=2"),
            (std::map<std::string, std::string>{{"local-learner-0", "[0]"},
                                                {"local-learner-1", "[1]"},
                                                {"local-learner-2", "[0]"},
                                                {"local-actor-0", "[0]"},
                                                {"local-actor-1", "[1]"}}));
  // A coordinator given GPUs 5 and 6 gives its workers those.
  ::setenv("CUDA_VISIBLE_DEVICES", "5,6", 1);
  EXPECT_EQ(VisibleDevices("learners=2,actors=1,gpus=2"),
            (std::map<std::string, std::string>{{"local-learner-0", "[5]"},
                                                {"local-learner-1", "[6]"},
                                                {"local-actor-0", "[5]"}}));
  LocalWorkerOptions o;
  EXPECT_THAT(ParseLocalWorkers("learners=1,gpus=3", &o),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("gpus=3, but this coordinator's "
                                 "CUDA_VISIBLE_DEVICES names 2 (5,6)")));
  // Set but empty: no GPU for anyone.
  ::setenv("CUDA_VISIBLE_DEVICES", "", 1);
  EXPECT_THAT(ParseLocalWorkers("learners=1,gpus=1", &o),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("gpus=1, but this coordinator's "
                                 "CUDA_VISIBLE_DEVICES names 0 ()")));
  ::setenv("CUDA_VISIBLE_DEVICES", "5,6", 1);
  EXPECT_EQ(VisibleDevices("learners=1,actors=1"),
            (std::map<std::string, std::string>{{"local-learner-0", "[5,6]"},
                                                {"local-actor-0", "[5,6]"}}));
  ::unsetenv("CUDA_VISIBLE_DEVICES");
}

}  // namespace
}  // namespace rl
