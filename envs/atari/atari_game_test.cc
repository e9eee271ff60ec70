// The native Atari game against the Gymnasium bridge's (rl_atari.py's
// CleanRLAtari, itself checked against Gymnasium's wrappers): the same
// actions give the same stacked frames, rewards, flags and game statistics
// at every step, recorded by tools/record_atari_golden.py into testdata/
// (Breakout and Pong as CleanRL runs them, Pong under a short game limit,
// Breakout with raw rewards, frame skip 3, a stack of 2 and no episodic
// life).
#include "envs/atari/atari_game.h"

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace rl::atari {
namespace {

std::string Runfile(const std::string& path) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return std::string(srcdir == nullptr ? "." : srcdir) + "/" +
         (workspace == nullptr ? "rl_service" : workspace) + "/" + path;
}

std::string RomPath(const std::string& game) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return std::string(srcdir == nullptr ? "." : srcdir) + "/ale/roms/" + game +
         ".bin";
}

uint64_t Fnv(const std::vector<uint8_t>& bytes) {
  uint64_t h = 1469598103934665603ull;
  for (const uint8_t b : bytes) h = (h ^ b) * 1099511628211ull;
  return h;
}

class AtariGoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(AtariGoldenTest, StepsAsTheBridge) {
  std::ifstream in(Runfile("envs/atari/testdata/" + GetParam() + ".txt"));
  ASSERT_TRUE(in) << GetParam();
  std::string line, word, name, ale_id;
  std::getline(in, line);
  std::istringstream header(line);
  int seed = 0, ale_seed = 0;
  header >> word >> name >> ale_id >> word >> seed >> word >> ale_seed;
  std::getline(in, line);
  std::istringstream kwargs(line.substr(6));
  AtariOptions options;
  options.noop_max = 0;
  options.ale_seed = ale_seed;
  while (kwargs >> word) {
    const std::string key = word.substr(0, word.find('='));
    const int value = std::stoi(word.substr(word.find('=') + 1));
    if (key == "max_num_frames_per_episode") {
      options.max_num_frames_per_episode = value;
    } else if (key == "reward_clip") {
      options.reward_clip = value != 0;
    } else if (key == "stack_num") {
      options.stack_num = value;
    } else if (key == "frame_skip") {
      options.frame_skip = value;
    } else if (key == "episodic_life") {
      options.episodic_life = value != 0;
    } else {
      FAIL() << "unknown kwarg " << key;
    }
  }
  const std::string game = ale_id.substr(4, ale_id.size() - 4 - 3);  // -v5
  options.rom_path = RomPath(RomName(game));
  AtariGame env(options);
  Rng rng(seed);
  std::vector<uint8_t> obs(env.observation_size());
  int steps = 0, resets = 0, games = 0, lives_lost = 0, truncations = 0;
  std::set<float> rewards;
  while (std::getline(in, line)) {
    std::istringstream row(line);
    std::string first;
    row >> first;
    if (first == "reset") {
      uint64_t want = 0;
      row >> want;
      env.Reset(rng, obs.data());
      ASSERT_EQ(Fnv(obs), want) << "reset after step " << steps;
      ++resets;
      continue;
    }
    const int action = std::stoi(first);
    float reward = 0;
    int terminated = 0, truncated = 0;
    std::string game_return, game_length;
    uint64_t want = 0;
    row >> reward >> terminated >> truncated >> game_return >> game_length >>
        want;
    const AtariStep step = env.Step(action, rng, obs.data());
    ++steps;
    ASSERT_EQ(step.reward, reward) << "step " << steps;
    ASSERT_EQ(step.terminated, terminated != 0) << "step " << steps;
    ASSERT_EQ(step.truncated, truncated != 0) << "step " << steps;
    ASSERT_EQ(step.game_over, game_return != "-") << "step " << steps;
    if (step.game_over) {
      ASSERT_EQ(step.game_return, std::stod(game_return)) << "step " << steps;
      ASSERT_EQ(step.game_length, std::stoi(game_length)) << "step " << steps;
      ++games;
    } else if (step.terminated) {
      ++lives_lost;
    }
    truncations += step.truncated ? 1 : 0;
    rewards.insert(step.reward);
    ASSERT_EQ(Fnv(obs), want) << "step " << steps;
  }
  EXPECT_GE(steps, 800);
  EXPECT_GE(resets, 1);
  EXPECT_GE(games + truncations, 1) << "no game ended";
  if (GetParam() == "breakout") EXPECT_GT(lives_lost, 0);
  if (GetParam() == "pong_truncated") EXPECT_GE(truncations, 3);
  if (GetParam() == "breakout_raw") {
    EXPECT_EQ(lives_lost, 0);  // no episodic life
  }
}

INSTANTIATE_TEST_SUITE_P(Games, AtariGoldenTest,
                         ::testing::Values("breakout", "pong", "pong_truncated",
                                           "breakout_raw"));

TEST(AtariGameTest, NoOpStartsComeFromTheGivenGenerator) {
  AtariOptions options;
  options.rom_path = RomPath("pong");
  AtariGame a(options), b(options);
  std::vector<uint8_t> first(a.observation_size()), second(first.size());
  // The same generator state: the same start.
  Rng r1(5), r2(5);
  a.Reset(r1, first.data());
  b.Reset(r2, second.data());
  EXPECT_EQ(first, second);
  // Over seeds, 1..30 no-ops start Pong at different frames: once the
  // ball is served (it waits about a second), it is elsewhere.
  std::set<uint64_t> starts;
  for (int seed = 0; seed < 12; ++seed) {
    AtariGame env(options);
    Rng rng(seed);
    env.Reset(rng, first.data());
    for (int i = 0; i < 30; ++i) env.Step(0, rng, first.data());
    starts.insert(Fnv(first));
  }
  EXPECT_GT(starts.size(), 3u);
}

TEST(AtariGameTest, BadActionsAndRomsAreErrors) {
  AtariOptions options;
  options.rom_path = RomPath("pong");
  AtariGame env(options);
  EXPECT_EQ(env.num_actions(), 6);
  EXPECT_EQ(env.observation_size(), 4 * 84 * 84);
  std::vector<uint8_t> obs(env.observation_size());
  Rng rng(1);
  env.Reset(rng, obs.data());
  EXPECT_THROW(env.Step(6, rng, obs.data()), std::out_of_range);
  options.rom_path = RomPath("no_such_game");
  EXPECT_THROW(AtariGame{options}, std::runtime_error);
}

TEST(AtariGameTest, RomNamesAreTheSnakeCaseOfGameNames) {
  EXPECT_EQ(RomName("Pong"), "pong");
  EXPECT_EQ(RomName("SpaceInvaders"), "space_invaders");
  EXPECT_EQ(RomName("MontezumaRevenge"), "montezuma_revenge");
}

}  // namespace
}  // namespace rl::atari
