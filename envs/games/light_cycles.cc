// LightCycles-v0: Tron's light cycles on a small board, two players, as a
// plugin with two agents per environment (rl_env_plugin.h's `agents`): the
// game a policy learns by playing itself, bundled as `plugin: light_cycles`.
//
// Each player rides a cycle that leaves a wall behind it. A cycle that
// rides into the board's edge or any trail (its own, the other's, either
// head) loses; both at once, or head on into one cell, is a draw. Every
// step each player goes straight, turns left or turns right (Discrete(3),
// relative to its heading). A player sees the board around its own head,
// turned so that it heads up: a (2S-1) x (2S-1) window centred on its head,
// in two planes (1 where a trail or the outside of the board is; 1 at the
// other cycle's head), flattened: float32 [2 * (2S-1)^2]. Reward at the
// end only: +1 a win, -1 a loss, 0 a draw; so a player's mean return is
// its wins minus its losses, per game.
//
// The two start in the second and the second-to-last column, heading at
// each other's side, in random rows that are never each other's mirror
// image (a policy playing itself from a mirrored start plays a mirrored
// game and draws).
//
// kwargs:
//   size      board side S, 6 to 16 (default 8)
//   opponent  "self": two agents per environment, player_0 and player_1,
//             both played by the run's policy (the default);
//             "scripted": one agent, player_0, against a cycle that rides
//             straight until the cell ahead is taken, then turns to the free
//             side with more room (cells it can still reach);
//             "random": one agent against uniform random moves.
//   draw_reward  both players' reward for a draw, -1 to 0 (default 0): a
//             draw made worse than nothing, for training (a game judged
//             by its returns counts a draw only at 0).
#include <algorithm>
#include <array>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "rl_env_plugin.hpp"

namespace {

// Up, right, down, left: clockwise, so a right turn is +1.
constexpr std::array<int, 4> kRow = {-1, 0, 1, 0};
constexpr std::array<int, 4> kCol = {0, 1, 0, -1};

enum class Opponent { kSelf, kScripted, kRandom };

Opponent ParseOpponent(const rlenv::Kwargs& kwargs) {
  const std::string o = kwargs.String("opponent", "self");
  if (o == "self") return Opponent::kSelf;
  if (o == "scripted") return Opponent::kScripted;
  if (o == "random") return Opponent::kRandom;
  throw std::invalid_argument("kwargs.opponent: \"" + o +
                              "\"; one of self, scripted, random");
}

int ParseSize(const rlenv::Kwargs& kwargs) {
  const int64_t size = kwargs.Int("size", 8);
  if (size < 6 || size > 16) {
    throw std::invalid_argument("kwargs.size: " + std::to_string(size) +
                                "; a board side of 6 to 16");
  }
  return static_cast<int>(size);
}

float ParseDrawReward(const rlenv::Kwargs& kwargs) {
  const double r = kwargs.Number("draw_reward", 0);
  if (!(r >= -1 && r <= 0)) {
    std::ostringstream out;
    out << "kwargs.draw_reward: " << r << "; from -1 to 0";
    throw std::invalid_argument(out.str());
  }
  return static_cast<float>(r);
}

void RefuseUnknownKwargs(const rlenv::Kwargs& kwargs) {
  for (const std::string& key : kwargs.Keys()) {
    if (key != "size" && key != "opponent" && key != "draw_reward") {
      throw std::invalid_argument("kwargs." + key +
                                  ": unknown (LightCycles-v0 takes size, "
                                  "opponent and draw_reward)");
    }
  }
}

class LightCycles final : public rlenv::MultiAgentEnv {
 public:
  static rlenv::Spaces Declare(const rlenv::Kwargs& kwargs) {
    RefuseUnknownKwargs(kwargs);
    ParseDrawReward(kwargs);
    const int window = 2 * ParseSize(kwargs) - 1;
    rlenv::Spaces s{rlenv::Space::Box({2 * window * window}, 0, 1),
                    rlenv::Space::Discrete(3)};
    s.reward_low = -1;
    s.reward_high = 1;
    if (ParseOpponent(kwargs) == Opponent::kSelf) {
      s.agents = 2;
      s.agent_names = {"player_0", "player_1"};
    } else {
      s.agent_names = {"player_0"};
    }
    return s;
  }

  explicit LightCycles(const rlenv::Kwargs& kwargs)
      : size_(ParseSize(kwargs)),
        window_(2 * size_ - 1),
        opponent_(ParseOpponent(kwargs)),
        draw_reward_(ParseDrawReward(kwargs)),
        taken_(size_ * size_, 0) {}

  void Reset(rlenv::Rng& rng, float* obs) override {
    std::fill(taken_.begin(), taken_.end(), 0);
    // Any rows but the mirror image of player_0's (size_ - 1 - row0).
    const int row0 = 1 + static_cast<int>(rng() % (size_ - 2));
    int row1 = 1 + static_cast<int>(rng() % (size_ - 3));
    if (row1 >= size_ - 1 - row0) ++row1;
    cycles_[0] = {row0, 1, 1};          // heading right
    cycles_[1] = {row1, size_ - 2, 3};  // heading left
    for (const Cycle& c : cycles_) taken_[c.row * size_ + c.col] = 1;
    Observe(obs);
  }

  void Step(const rlenv::Action* actions, rlenv::Rng& rng, float* obs,
            rlenv::StepResult* results) override {
    std::array<int64_t, 2> moves = {actions[0].index(), 0};
    if (opponent_ == Opponent::kSelf) {
      moves[1] = actions[1].index();
    } else if (opponent_ == Opponent::kRandom) {
      moves[1] = static_cast<int64_t>(rng() % 3);
    } else {
      moves[1] = Scripted(cycles_[1], rng);
    }
    std::array<bool, 2> crashed{};
    for (int p = 0; p < 2; ++p) {
      if (moves[p] < 0 || moves[p] > 2) {
        throw std::invalid_argument("action " + std::to_string(moves[p]) +
                                    " of player_" + std::to_string(p) +
                                    "; 0 (straight), 1 (left) or 2 (right)");
      }
      Cycle& c = cycles_[p];
      c.heading = Turn(c.heading, moves[p]);
      c.row += kRow[c.heading];
      c.col += kCol[c.heading];
      crashed[p] = Blocked(c.row, c.col);
    }
    if (cycles_[0].row == cycles_[1].row && cycles_[0].col == cycles_[1].col) {
      crashed = {true, true};  // head on
    }
    for (const Cycle& c : cycles_) {
      if (Inside(c.row, c.col)) taken_[c.row * size_ + c.col] = 1;
    }
    const bool over = crashed[0] || crashed[1];
    const bool draw = crashed[0] && crashed[1];
    const float reward0 = crashed[0] == crashed[1] ? 0.f
                          : crashed[1]             ? 1.f
                                                   : -1.f;
    const int agents = opponent_ == Opponent::kSelf ? 2 : 1;
    for (int p = 0; p < agents; ++p) {
      results[p].reward = draw ? draw_reward_ : p == 0 ? reward0 : -reward0;
      results[p].terminated = over;
    }
    Observe(obs);  // after a crash: the last observation of the game
  }

  // For a resume that plays on from the same positions (the helper keeps
  // the random stream): the board and both cycles.
  void SaveState(std::string* bytes) const {
    bytes->assign(taken_.begin(), taken_.end());
    for (const Cycle& c : cycles_) {
      for (const int v : {c.row, c.col, c.heading}) {
        bytes->push_back(static_cast<char>(v));
      }
    }
  }
  void RestoreState(const std::string& bytes) {
    if (bytes.size() != taken_.size() + 6) {
      throw std::invalid_argument(
          "LightCycles-v0 state: " + std::to_string(bytes.size()) +
          " bytes; a " + std::to_string(size_) + "x" + std::to_string(size_) +
          " board's is " + std::to_string(taken_.size() + 6));
    }
    std::array<Cycle, 2> cycles{};
    for (int p = 0; p < 2; ++p) {
      const char* v = bytes.data() + taken_.size() + 3 * p;
      cycles[p] = {v[0], v[1], v[2]};
      if (!Inside(cycles[p].row, cycles[p].col) || cycles[p].heading < 0 ||
          cycles[p].heading > 3) {
        throw std::invalid_argument("LightCycles-v0 state: player_" +
                                    std::to_string(p) +
                                    "'s cycle is off the board");
      }
    }
    for (size_t i = 0; i < taken_.size(); ++i) {
      if (bytes[i] != 0 && bytes[i] != 1) {
        throw std::invalid_argument("LightCycles-v0 state: cell " +
                                    std::to_string(i) + " is neither 0 nor 1");
      }
    }
    std::copy(bytes.begin(), bytes.begin() + taken_.size(), taken_.begin());
    cycles_ = cycles;
  }

 private:
  struct Cycle {
    int row, col, heading;
  };

  static int Turn(int heading, int64_t move) {
    return move == 1   ? (heading + 3) % 4
           : move == 2 ? (heading + 1) % 4
                       : heading;
  }
  bool Inside(int row, int col) const {
    return row >= 0 && row < size_ && col >= 0 && col < size_;
  }
  bool Blocked(int row, int col) const {
    return !Inside(row, col) || taken_[row * size_ + col] != 0;
  }

  // Free cells reachable from (row, col), itself included (0 if taken).
  int Room(int row, int col) const {
    if (Blocked(row, col)) return 0;
    std::vector<uint8_t> seen(taken_);
    std::vector<int> stack = {row * size_ + col};
    seen[stack[0]] = 1;
    int n = 0;
    while (!stack.empty()) {
      const int at = stack.back();
      stack.pop_back();
      ++n;
      for (int d = 0; d < 4; ++d) {
        const int r = at / size_ + kRow[d], c = at % size_ + kCol[d];
        if (Inside(r, c) && !seen[r * size_ + c]) {
          seen[r * size_ + c] = 1;
          stack.push_back(r * size_ + c);
        }
      }
    }
    return n;
  }

  // Straight while the cell ahead is free, else the side with more room
  // (a coin between equals).
  int64_t Scripted(const Cycle& c, rlenv::Rng& rng) const {
    const int h = c.heading;
    if (!Blocked(c.row + kRow[h], c.col + kCol[h])) return 0;
    const int left = (h + 3) % 4, right = (h + 1) % 4;
    const int room_left = Room(c.row + kRow[left], c.col + kCol[left]);
    const int room_right = Room(c.row + kRow[right], c.col + kCol[right]);
    if (room_left != room_right) return room_left > room_right ? 1 : 2;
    return 1 + static_cast<int64_t>(rng() % 2);
  }

  // Each agent's window: its head at the centre, its heading up.
  void Observe(float* obs) const {
    const int agents = opponent_ == Opponent::kSelf ? 2 : 1;
    const int plane = window_ * window_;
    for (int p = 0; p < agents; ++p) {
      float* out = obs + p * 2 * plane;
      const Cycle& me = cycles_[p];
      const Cycle& other = cycles_[1 - p];
      const int right = (me.heading + 1) % 4;
      for (int i = 0; i < window_; ++i) {
        const int ahead = size_ - 1 - i;
        for (int j = 0; j < window_; ++j) {
          const int aside = j - (size_ - 1);
          const int row =
              me.row + ahead * kRow[me.heading] + aside * kRow[right];
          const int col =
              me.col + ahead * kCol[me.heading] + aside * kCol[right];
          out[i * window_ + j] = Blocked(row, col) ? 1.f : 0.f;
          out[plane + i * window_ + j] =
              row == other.row && col == other.col ? 1.f : 0.f;
        }
      }
    }
  }

  const int size_;
  const int window_;
  const Opponent opponent_;
  const float draw_reward_;     // both players' reward for a draw
  std::vector<uint8_t> taken_;  // size_ x size_, row-major: trails and heads
  std::array<Cycle, 2> cycles_{};
};

}  // namespace

RL_ENV_PLUGIN(LightCycles, "light_cycles 1.0")
