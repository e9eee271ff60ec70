// Gang agreement over real gloo process groups on loopback, a thread per
// rank.
#include "learner/gang_sync.h"

#include <torch/optim/adam.h>

#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "learner/c10d_collective.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

AckWatermark W(int actor, uint64_t incarnation, int64_t sequence) {
  AckWatermark w;
  w.set_actor_id(actor);
  w.set_incarnation(incarnation);
  w.set_sequence_number(sequence);
  return w;
}

std::vector<std::string> Text(const std::vector<AckWatermark>& all) {
  std::vector<std::string> out;
  for (const auto& w : all) {
    out.push_back(absl::StrCat(w.actor_id(), "/", w.incarnation(), "/",
                               w.sequence_number()));
  }
  return out;
}

// Rank 0's weights before they are shared.
absl::Mutex rank_zero_mu;
std::map<std::string, torch::Tensor> rank_zero_weights;

void RunGang(int n, const std::function<void(int, Collective&)>& body) {
  ASSERT_OK_AND_ASSIGN(auto server, RendezvousServer::Start(0));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      CollectiveOptions options;
      options.rank = r;
      options.world_size = n;
      options.rendezvous_address = absl::StrCat("127.0.0.1:", server->port());
      options.gang_id = "gang-sync-test";
      options.timeout = absl::Seconds(60);
      auto collective = ConnectCollective(options);
      ASSERT_OK(collective.status());
      body(r, **collective);
    });
  }
  for (auto& t : threads) t.join();
}

TEST(GangSyncTest, MergeTakesOwnActorsThenTheGangsThenWhatWasResumed) {
  const std::vector<AckWatermark> known = {W(0, 1, 5), W(1, 2, 7), W(2, 3, 1)};
  const std::vector<AckWatermark> gathered = {W(1, 2, 9), W(3, 4, 0)};
  const std::vector<AckWatermark> here = {W(0, 8, 2)};
  // Actor 3 acknowledged nothing yet: not kept.
  EXPECT_THAT(Text(MergeWatermarks(known, gathered, here)),
              ::testing::ElementsAre("0/8/2", "1/2/9", "2/3/1"));
}

TEST(GangSyncTest, EveryRankGetsEveryRanksWatermarksAndRankZerosState) {
  constexpr int kRanks = 2;
  RunGang(kRanks, [](int rank, Collective& c) {
    // Rank r's actors are r and r + 2.
    const std::vector<AckWatermark> mine = {W(rank, 10 + rank, 3 + rank),
                                            W(rank + 2, 20 + rank, 1)};
    ASSERT_OK_AND_ASSIGN(const std::vector<AckWatermark> all,
                         GatherWatermarks(c, mine));
    EXPECT_THAT(Text(all),
                ::testing::ElementsAre("0/10/3", "2/20/1", "1/11/4", "3/21/1"));

    ActorCriticConfig config;
    config.observation_size = 3;
    config.num_actions = 2;
    config.hidden_sizes = {8};
    ActorCritic policy(config);
    {
      torch::NoGradGuard no_grad;
      absl::MutexLock lock(&rank_zero_mu);
      for (auto& item : policy->named_parameters()) {
        item.value().add_(rank);  // unlike on every rank
        if (rank == 0) rank_zero_weights[item.key()] = item.value().clone();
      }
    }
    torch::optim::Adam adam(policy->parameters(),
                            torch::optim::AdamOptions(1e-3));
    TensorMap extra;
    extra["counters"] = torch::tensor({int64_t{rank}, int64_t{7}});
    ASSERT_OK(ShareRankZeroState(c, policy, adam, &extra));
    EXPECT_EQ(extra.at("counters")[0].item<int64_t>(), 0);  // rank 0's
    absl::MutexLock lock(&rank_zero_mu);
    for (const auto& item : policy->named_parameters()) {
      EXPECT_TRUE(torch::equal(item.value(), rank_zero_weights[item.key()]))
          << item.key();
    }
  });
}

}  // namespace
}  // namespace rl
