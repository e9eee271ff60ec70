// Real gloo process groups over loopback, one thread per rank.
#include "learner/c10d_collective.h"

#include <sched.h>
#include <torch/types.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/cuda_runtime.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

std::atomic<int> next_gang{0};

// Starts a store and runs `body(rank, collective)` on `n` threads.
void RunGang(int n, const std::function<void(int, Collective&)>& body,
             absl::Duration timeout = absl::Seconds(30)) {
  ASSERT_OK_AND_ASSIGN(auto server, RendezvousServer::Start(0));
  const std::string gang = absl::StrCat("test/", next_gang++);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      CollectiveOptions options;
      options.rank = r;
      options.world_size = n;
      options.rendezvous_address = absl::StrCat("127.0.0.1:", server->port());
      options.gang_id = gang;
      options.timeout = timeout;
      auto collective = ConnectCollective(options);
      ASSERT_OK(collective.status());
      body(r, **collective);
    });
  }
  for (auto& t : threads) t.join();
}

TEST(C10dCollectiveTest, AllReduceAndBroadcast) {
  RunGang(3, [](int rank, Collective& c) {
    EXPECT_EQ(c.rank(), rank);
    EXPECT_EQ(c.world_size(), 3);
    torch::Tensor sum = torch::full({4}, static_cast<float>(rank + 1));
    ASSERT_OK(c.AllReduce(sum, ReduceOp::kSum));
    EXPECT_TRUE(torch::equal(sum, torch::full({4}, 6.0f)));
    torch::Tensor max = torch::tensor({int64_t{rank}, int64_t{-rank}});
    ASSERT_OK(c.AllReduce(max, ReduceOp::kMax));
    EXPECT_EQ(max[0].item<int64_t>(), 2);
    EXPECT_EQ(max[1].item<int64_t>(), 0);
    torch::Tensor b = torch::full({2, 2}, static_cast<float>(rank));
    ASSERT_OK(c.Broadcast(b, 1));
    EXPECT_TRUE(torch::equal(b, torch::full({2, 2}, 1.0f)));
  });
}

// Thread ids of this process, and how many run under SCHED_BATCH.
std::set<long> Threads() {
  std::set<long> tids;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    tids.insert(std::stol(e.path().filename().string()));
  }
  return tids;
}

TEST(C10dCollectiveTest, GlooThreadsDoNotPreemptOnWakeup) {
  // Gloo's network thread spins while another thread holds the pair's lock;
  // under SCHED_BATCH it never preempts that holder (c10d_collective.cc).
  const std::set<long> before = Threads();
  std::atomic<int> batch_threads{0};
  std::atomic<int> callers_left_batch{0};
  RunGang(2, [&](int, Collective& c) {
    if (sched_getscheduler(0) == SCHED_BATCH) ++callers_left_batch;
    torch::Tensor t = torch::ones({8});
    ASSERT_OK(c.AllReduce(t, ReduceOp::kSum));
    static std::mutex mu;
    std::lock_guard<std::mutex> lock(mu);
    if (batch_threads.load() > 0) return;  // counted by the other rank
    for (long tid : Threads()) {
      if (before.count(tid) == 0 && sched_getscheduler(tid) == SCHED_BATCH) {
        ++batch_threads;
      }
    }
  });
  // Each rank's network thread and process-group worker; the ranks' own
  // threads are back to their policy.
  EXPECT_GE(batch_threads.load(), 4);
  EXPECT_EQ(callers_left_batch.load(), 0);
  EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);
}

TEST(C10dCollectiveTest, CoalescedSumBytesAndSyncCheck) {
  RunGang(2, [](int rank, Collective& c) {
    std::vector<torch::Tensor> ts = {
        torch::full({3}, 1.0f + rank),
        torch::full({2, 2}, 10.0, torch::kFloat64)};
    ASSERT_OK(AllReduceSumCoalesced(c, ts));
    EXPECT_TRUE(torch::equal(ts[0], torch::full({3}, 3.0f)));
    EXPECT_TRUE(
        torch::equal(ts[1], torch::full({2, 2}, 20.0, torch::kFloat64)));

    std::string bytes = rank == 0 ? std::string("state\0bytes", 11) : "";
    ASSERT_OK(BroadcastBytes(c, &bytes, 0));
    EXPECT_EQ(bytes, std::string("state\0bytes", 11));

    std::vector<torch::Tensor> same = {torch::arange(10, torch::kFloat32)};
    EXPECT_OK(CheckInSync(c, same, "parameters"));
    std::vector<torch::Tensor> differ = {torch::full({5}, 1.0f * rank)};
    const absl::Status status = CheckInSync(c, differ, "parameters");
    EXPECT_THAT(status, StatusIs(absl::StatusCode::kDataLoss,
                                 HasSubstr("parameters differ between")));
  });
}

TEST(C10dCollectiveTest, RendezvousNamesTheRanksThatNeverJoined) {
  ASSERT_OK_AND_ASSIGN(auto server, RendezvousServer::Start(0));
  CollectiveOptions options;
  options.rank = 0;
  options.world_size = 3;
  options.rendezvous_address = absl::StrCat("127.0.0.1:", server->port());
  options.gang_id = "test/missing";
  options.rendezvous_timeout = absl::Milliseconds(300);
  EXPECT_THAT(ConnectCollective(options).status(),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("rank(s) 1, 2 of 3 did not join")));
}

// A rank that does not know the gang's store secret never meets it (nor
// would an outsider on the network): the keys it reads and writes are not
// the gang's.
TEST(C10dCollectiveTest, RanksMeetOnlyUnderTheSameStoreSecret) {
  ASSERT_OK_AND_ASSIGN(auto server, RendezvousServer::Start(0));
  // Each rank's collective lives until both ranks are done: a rank that
  // dropped its process group as soon as it had one would close the
  // sockets its peer is still finishing its handshake on.
  std::unique_ptr<Collective> kept[2];
  auto join = [&](int rank, const std::string& gang,
                  const std::string& secret) -> absl::Status {
    CollectiveOptions options;
    options.rank = rank;
    options.world_size = 2;
    options.rendezvous_address = absl::StrCat("127.0.0.1:", server->port());
    options.gang_id = gang;
    options.store_secret = secret;
    options.rendezvous_timeout = absl::Seconds(2);
    auto collective = ConnectCollective(options);
    if (!collective.ok()) return collective.status();
    kept[rank] = *std::move(collective);
    return absl::OkStatus();
  };
  absl::Status s0, s1;
  std::thread t0([&] { s0 = join(0, "test/secret-1", "right"); });
  std::thread t1([&] { s1 = join(1, "test/secret-1", "wrong"); });
  t0.join();
  t1.join();
  EXPECT_THAT(s0, StatusIs(absl::StatusCode::kDeadlineExceeded,
                           HasSubstr("rank(s) 1 of 2 did not join")));
  EXPECT_EQ(s1.code(), absl::StatusCode::kDeadlineExceeded) << s1;

  std::thread t2([&] { s0 = join(0, "test/secret-2", "right"); });
  std::thread t3([&] { s1 = join(1, "test/secret-2", "right"); });
  t2.join();
  t3.join();
  EXPECT_OK(s0);
  EXPECT_OK(s1);
}

TEST(C10dCollectiveTest, RendezvousCanBeAbandoned) {
  ASSERT_OK_AND_ASSIGN(auto server, RendezvousServer::Start(0));
  CollectiveOptions options;
  options.rank = 1;
  options.world_size = 2;
  options.rendezvous_address = absl::StrCat("127.0.0.1:", server->port());
  options.gang_id = "test/abandoned";
  options.rendezvous_timeout = absl::Seconds(600);
  const absl::Time cancel_at = absl::Now() + absl::Milliseconds(200);
  options.cancelled = [&] { return absl::Now() > cancel_at; };
  EXPECT_THAT(ConnectCollective(options).status(),
              StatusIs(absl::StatusCode::kCancelled, HasSubstr("abandoned")));
}

TEST(C10dCollectiveTest, BadOptionsAreRefused) {
  CollectiveOptions options;
  options.rank = 2;
  options.world_size = 2;
  options.gang_id = "g";
  options.rendezvous_address = "127.0.0.1:1";
  EXPECT_THAT(ConnectCollective(options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  options.rank = 0;
  options.rendezvous_address = "no-port";
  EXPECT_THAT(ConnectCollective(options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("rendezvous_address")));
  options.rendezvous_address = "127.0.0.1:1";
  options.backend = "nccl";
  options.device = "cpu";
  EXPECT_THAT(ConnectCollective(options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("backend nccl takes a CUDA device")));
  // Where LibTorch's CUDA runtime cannot load (no driver), nccl says so
  // before any rendezvous; where it can, the library is looked for, then
  // the group tried (and the store at port 1 is unreachable).
  options.device = "cuda:0";
  const absl::Status nccl = ConnectCollective(options).status();
  if (!LoadCudaRuntime().ok()) {
    EXPECT_THAT(nccl, StatusIs(absl::StatusCode::kFailedPrecondition,
                               HasSubstr("backend nccl: libnccl_backend.so "
                                         "needs LibTorch's CUDA runtime")));
  } else if (nccl.code() == absl::StatusCode::kFailedPrecondition) {
    // Built without --config=cuda: no library beside the test.
    EXPECT_THAT(nccl.message(), HasSubstr("libnccl_backend.so"));
  } else {
    EXPECT_THAT(nccl, StatusIs(absl::StatusCode::kUnavailable));
  }
  options.backend = "mpi";
  EXPECT_THAT(ConnectCollective(options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("expected gloo or nccl")));
}

// A peer that goes away is an error on the survivor, not a hang: the
// survivor's timeout is far longer than the test waits.
TEST(C10dCollectiveTest, LostPeerIsAbortedNotAHang) {
  std::atomic<bool> left{false};
  RunGang(
      2,
      [&](int rank, Collective& c) {
        torch::Tensor t = torch::ones({8});
        ASSERT_OK(c.AllReduce(t, ReduceOp::kSum));
        if (rank == 1) {
          left = true;
          return;  // RunGang destroys this rank's process group.
        }
        while (!left) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        const absl::Time start = absl::Now();
        absl::Status status;
        for (int i = 0; i < 3 && status.ok(); ++i) {
          status = c.AllReduce(t, ReduceOp::kSum);
        }
        EXPECT_THAT(status, StatusIs(absl::StatusCode::kAborted,
                                     HasSubstr("rank 0 of 2")));
        EXPECT_LT(absl::Now() - start, absl::Seconds(60));
      },
      absl::Seconds(600));
}

}  // namespace
}  // namespace rl
