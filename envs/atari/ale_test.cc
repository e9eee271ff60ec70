// ALE built from its pinned source (third_party/ale) runs the wheel's ROMs:
// Pong loads, its minimal action set is the game's, an episode's frames
// and rewards come out of the emulator, the same seed replays the same
// frames, and its screens are the installed ale-py wheel's (the Gymnasium
// bridge's ALE) frame for frame.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "ale/ale_interface.hpp"
#include "gtest/gtest.h"

namespace rl {
namespace {

std::string RomPath(const std::string& game) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return std::string(srcdir == nullptr ? "." : srcdir) + "/ale/roms/" + game +
         ".bin";
}

struct Played {
  std::vector<unsigned char> last_frame;
  double total_reward = 0;
  int frames = 0;
  int nonzero_rewards = 0;
};

// `steps` actions cycling through the minimal action set, from a fresh
// reset with `seed`, sticky actions off.
Played Play(const std::string& game, int seed, int steps) {
  ale::ALEInterface ale;
  ale.setInt("random_seed", seed);
  ale.setFloat("repeat_action_probability", 0.0f);
  ale.loadROM(RomPath(game));
  const ale::ActionVect actions = ale.getMinimalActionSet();
  Played played;
  for (int i = 0; i < steps && !ale.game_over(); ++i) {
    const ale::reward_t r = ale.act(actions[(i / 8) % actions.size()]);
    played.total_reward += r;
    played.nonzero_rewards += r != 0 ? 1 : 0;
  }
  played.frames = ale.getEpisodeFrameNumber();
  ale.getScreenGrayscale(played.last_frame);
  return played;
}

TEST(AleTest, PongPlaysFromTheWheelsRom) {
  ale::ALEInterface ale;
  ale.setInt("random_seed", 1);
  ale.loadROM(RomPath("pong"));
  // Pong's minimal set: NOOP, FIRE, RIGHT, LEFT, RIGHTFIRE, LEFTFIRE.
  EXPECT_EQ(ale.getMinimalActionSet().size(), 6u);
  std::vector<unsigned char> frame;
  ale.getScreenGrayscale(frame);
  EXPECT_EQ(frame.size(), 210u * 160u);

  const Played played = Play("pong", 1, 3000);
  EXPECT_EQ(played.frames, 3000);
  // Points are scored in 3000 frames (the opponent's at least): rewards of
  // -1 or +1 come out of the emulator.
  EXPECT_GT(played.nonzero_rewards, 0);
  EXPECT_LT(played.total_reward, 0);  // cycling actions loses points
  int distinct = 0;
  std::vector<bool> seen(256, false);
  for (unsigned char p : played.last_frame) {
    if (!seen[p]) ++distinct;
    seen[p] = true;
  }
  EXPECT_GE(distinct, 3);  // background, paddles, score: a drawn frame
}

TEST(AleTest, TheSameSeedReplaysTheSameFrames) {
  const Played a = Play("breakout", 7, 1500);
  const Played b = Play("breakout", 7, 1500);
  EXPECT_EQ(a.frames, b.frames);
  EXPECT_EQ(a.total_reward, b.total_reward);
  EXPECT_EQ(a.last_frame, b.last_frame);
}

// What tools/ale_screen_hashes.py printed with the installed ale-py 0.10.2:
// the same play through the wheel gives the same frames, total reward and
// grey screens (FNV-1a 64 over every step's 210x160 bytes) as this build
// of 0.10.1's source, so a native plugin can match the bridge step for
// step.
TEST(AleTest, ScreensAreTheWheelsFrameForFrame) {
  struct Want {
    const char* game;
    int frames;
    double total_reward;
    uint64_t hash;
  };
  for (const Want& want : {Want{"pong", 1944, -34, 10571174305835960289ull},
                           Want{"breakout", 507, 0, 3456263143014042947ull}}) {
    ale::ALEInterface ale;
    ale.setInt("random_seed", 1);
    ale.setFloat("repeat_action_probability", 0.0f);
    ale.loadROM(RomPath(want.game));
    const ale::ActionVect actions = ale.getMinimalActionSet();
    uint64_t hash = 1469598103934665603ull;
    double total = 0;
    std::vector<unsigned char> grey;
    for (int i = 0; i < 5000; ++i) {
      if (ale.game_over()) ale.reset_game();
      total += ale.act(actions[(i / 8) % actions.size()]);
      ale.getScreenGrayscale(grey);
      for (unsigned char c : grey) {
        hash ^= c;
        hash *= 1099511628211ull;
      }
    }
    EXPECT_EQ(ale.getEpisodeFrameNumber(), want.frames) << want.game;
    EXPECT_EQ(total, want.total_reward) << want.game;
    EXPECT_EQ(hash, want.hash) << want.game;
  }
}

}  // namespace
}  // namespace rl
