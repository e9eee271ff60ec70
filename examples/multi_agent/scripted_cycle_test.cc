#include "examples/multi_agent/scripted_cycle.h"

#include <torch/torch.h>

#include <set>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace rl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int kSize = 8;
constexpr int kWindow = 2 * kSize - 1;
constexpr int kHead = kSize - 1;

// A player's observation on an 8x8 board whose head is at the middle of
// its bottom row (the board: window rows kHead-7..kHead, columns
// kHead-3..kHead+4), with `taken` (window cells) taken.
torch::Tensor Window(const std::vector<std::pair<int, int>>& taken) {
  torch::Tensor plane = torch::ones({kWindow, kWindow});
  plane.slice(0, kHead - 7, kHead + 1).slice(1, kHead - 3, kHead + 5).zero_();
  plane[kHead][kHead] = 1;  // its own head
  for (const auto& [row, col] : taken) plane[row][col] = 1;
  return torch::cat({plane.flatten(), torch::zeros({kWindow * kWindow})});
}

std::vector<int64_t> Act(torch::jit::Module& player,
                         const std::vector<torch::Tensor>& boards) {
  const auto out = player.forward({torch::stack(boards)}).toTuple();
  const torch::Tensor actions = out->elements()[0].toTensor();
  EXPECT_EQ(out->elements()[1].toTensor().size(0),
            static_cast<int64_t>(boards.size()));
  return {actions.data_ptr<int64_t>(),
          actions.data_ptr<int64_t>() + actions.numel()};
}

TEST(ScriptedCycleTest, StraightElseTheSideWithMoreRoom) {
  ASSERT_OK_AND_ASSIGN(torch::jit::Module player, ScriptedCycle(kSize));
  // Free ahead: straight.
  EXPECT_THAT(Act(player, {Window({})}), ElementsAre(0));
  // Blocked ahead, the left a pocket of one cell: right. Mirrored: left.
  EXPECT_THAT(Act(player, {Window({{kHead - 1, kHead},
                                   {kHead - 1, kHead - 1},
                                   {kHead, kHead - 2}}),
                           Window({{kHead - 1, kHead},
                                   {kHead - 1, kHead + 1},
                                   {kHead, kHead + 2}})}),
              ElementsAre(2, 1));
  // Blocked ahead and on the left: right.
  EXPECT_THAT(Act(player, {Window({{kHead - 1, kHead}, {kHead, kHead - 1}})}),
              ElementsAre(2));
}

TEST(ScriptedCycleTest, ACoinBetweenEqualRooms) {
  ASSERT_OK_AND_ASSIGN(torch::jit::Module player, ScriptedCycle(kSize));
  // A wall across the board just ahead, and the row's last cell taken:
  // each side reaches 3 cells of the head's row.
  std::vector<std::pair<int, int>> wall = {{kHead, kHead + 4}};
  for (int col = 0; col < kWindow; ++col) wall.emplace_back(kHead - 1, col);
  const std::vector<int64_t> actions =
      Act(player, std::vector<torch::Tensor>(200, Window(wall)));
  EXPECT_EQ(std::set<int64_t>(actions.begin(), actions.end()),
            (std::set<int64_t>{1, 2}));
}

TEST(ScriptedCycleTest, SavesAFileThatLoadsAndRefusesABadSize) {
  ASSERT_OK_AND_ASSIGN(torch::jit::Module player, ScriptedCycle(kSize));
  const std::string path = MakeTestDir("scripted") + "/scripted.pt";
  player.save(path);
  torch::jit::Module loaded = torch::jit::load(path);
  EXPECT_THAT(Act(loaded, {Window({})}), ElementsAre(0));
  EXPECT_THAT(ScriptedCycle(3).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("size 3: a board side of 6 to 16")));
}

TEST(ScriptedCycleTest, TheRandomPlayerDrawsEveryMove) {
  ASSERT_OK_AND_ASSIGN(torch::jit::Module player, RandomCycle());
  const std::vector<int64_t> actions =
      Act(player, std::vector<torch::Tensor>(300, Window({})));
  EXPECT_EQ(std::set<int64_t>(actions.begin(), actions.end()),
            (std::set<int64_t>{0, 1, 2}));
}

}  // namespace
}  // namespace rl
