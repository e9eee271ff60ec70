// One Atari game preprocessed as CleanRL's ppo_atari.py and EnvPool do it,
// in C++ over ALE (no Python in the step), step for step what the Gymnasium
// bridge's rl_atari:<Game>-v5 (envs/gym_bridge/rl_atari.py, CleanRLAtari)
// gives:
//   - a new game: ALE's reset, then 1..noop_max random no-ops;
//   - frame_skip frames per action, the last two max-pooled, resized to
//     screen_size x screen_size grey by OpenCV's area resize (frame_ops.h);
//   - episodic life: a lost life ends the training episode (terminated)
//     and the game goes on (one no-op) at the next reset;
//   - FIRE then UP after each reset, for games whose actions have FIRE;
//   - rewards clipped to their sign (the game's own return kept apart);
//   - stack_num stacked frames: observations uint8 [stack, size, size];
//   - at most max_num_frames_per_episode frames a game (ALE truncates).
// Errors are exceptions (std::runtime_error): this is plugin code, and the
// plugin turns them into the ABI's error strings.
#ifndef RL_ENVS_ATARI_ATARI_GAME_H_
#define RL_ENVS_ATARI_ATARI_GAME_H_

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "envs/atari/frame_ops.h"

namespace ale {
class ALEInterface;
}

namespace rl::atari {

using Rng = std::mt19937_64;

struct AtariOptions {
  std::string rom_path;  // the game's ROM (ale-py's roms/<game>.bin)
  int noop_max = 30;
  int frame_skip = 4;
  int screen_size = 84;
  int stack_num = 4;
  bool episodic_life = true;
  bool reward_clip = true;
  bool fire_reset = true;
  float repeat_action_probability = 0.0f;
  int max_num_frames_per_episode = 108000;
  int ale_seed = 0;  // ALE's random_seed (sticky actions draw from it)
};

// What one step gave: the (clipped) reward and flags of the training
// episode, and where a game ended, its raw return and length in steps.
struct AtariStep {
  float reward = 0;
  bool terminated = false;
  bool truncated = false;
  bool game_over = false;
  double game_return = 0;
  int32_t game_length = 0;
};

// "Pong" -> "pong", "SpaceInvaders" -> "space_invaders": the ROM file
// name (without .bin) of a game's Gymnasium name.
std::string RomName(const std::string& game);

// Length-prefixed fields of a checkpoint (the game's and the plugin's).
void PutBytes(std::string* out, const void* data, size_t size);
// The next field, which must be `size` bytes (std::runtime_error if not).
void GetBytes(std::string_view* in, void* data, size_t size);
void PutString(std::string* out, std::string_view bytes);
std::string GetString(std::string_view* in);

class AtariGame {
 public:
  explicit AtariGame(const AtariOptions& options);
  ~AtariGame();
  AtariGame(const AtariGame&) = delete;
  AtariGame& operator=(const AtariGame&) = delete;

  int num_actions() const { return static_cast<int>(actions_.size()); }
  // Bytes of one observation: stack_num x screen_size x screen_size.
  int64_t observation_size() const;

  // A new training episode (a new game, or the next life): writes the
  // first stacked observation. `rng` draws the no-ops.
  void Reset(Rng& rng, uint8_t* obs);
  // One action (an index into the game's minimal action set): writes the
  // next stacked observation.
  AtariStep Step(int action, Rng& rng, uint8_t* obs);

  // Checkpoints: the game's whole state (ALE's emulator with its random
  // state, the last screens, the frame stack, lives and the running game's
  // return and length) appended to `out`. RestoreState reads what
  // SaveState wrote from the front of `in` and drops it; a game of other
  // options (screen, stack) or bytes cut short throw std::runtime_error.
  void SaveState(std::string* out);
  void RestoreState(std::string_view* in);

 private:
  struct LifeStep {
    double reward = 0;
    bool terminated = false;
    bool truncated = false;
    bool game_over = false;
  };
  // frame_skip frames of one action; the last two screens kept.
  LifeStep Frames(int action);
  // The max of the last two screens, resized into frame_.
  void Frame();
  void NewGame(Rng& rng);
  LifeStep OneLifeStep(int action);
  void LifeReset(Rng& rng);
  void Push(uint8_t* obs);

  AtariOptions options_;
  std::unique_ptr<ale::ALEInterface> ale_;
  std::vector<int> actions_;  // ALE's codes of the minimal action set
  bool fire_ = false;
  AreaResize resize_;
  int height_ = 0, width_ = 0;
  // [0]: the last frame, grey and max-pooled (what was resized); [1]: the
  // palette indices of a step's second-to-last frame, read only within
  // that step (prev_read_).
  std::vector<uint8_t> screens_[2];
  bool prev_read_ = false;
  // ALE's palette index -> grey (its grey palette), and the last frame of
  // a step as indices when Frames() read it (valid until the next act):
  // Frame() greys both frames and takes their max in one pass.
  uint8_t grey_[256] = {};
  const uint8_t* last_indices_ = nullptr;
  std::vector<uint8_t> frame_;  // the last preprocessed frame
  std::vector<uint8_t> stack_;  // [stack_num, size, size]
  int lives_ = 0;
  bool game_over_ = true;
  double return_ = 0;
  int32_t length_ = 0;
};

}  // namespace rl::atari

#endif  // RL_ENVS_ATARI_ATARI_GAME_H_
