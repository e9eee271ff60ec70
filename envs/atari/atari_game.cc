#include "envs/atari/atari_game.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "ale/ale_interface.hpp"
#include "ale/emucore/OSystem.hxx"

namespace rl::atari {

std::string RomName(const std::string& game) {
  std::string out;
  for (size_t i = 0; i < game.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(game[i]);
    if (std::isupper(c) && i > 0) out += '_';
    out += static_cast<char>(std::tolower(c));
  }
  return out;
}

void PutString(std::string* out, std::string_view bytes) {
  const uint64_t size = bytes.size();
  out->append(reinterpret_cast<const char*>(&size), sizeof(size));
  out->append(bytes.data(), bytes.size());
}

std::string GetString(std::string_view* in) {
  uint64_t size = 0;
  if (in->size() < sizeof(size)) {
    throw std::runtime_error("saved state: cut short");
  }
  std::memcpy(&size, in->data(), sizeof(size));
  in->remove_prefix(sizeof(size));
  if (in->size() < size) throw std::runtime_error("saved state: cut short");
  std::string bytes(in->substr(0, size));
  in->remove_prefix(size);
  return bytes;
}

void PutBytes(std::string* out, const void* data, size_t size) {
  PutString(out, std::string_view(static_cast<const char*>(data), size));
}

void GetBytes(std::string_view* in, void* data, size_t size) {
  const std::string bytes = GetString(in);
  if (bytes.size() != size) {
    throw std::runtime_error("saved state: a field of " +
                             std::to_string(bytes.size()) +
                             " bytes where this game keeps " +
                             std::to_string(size) + " (other env.kwargs?)");
  }
  std::memcpy(data, bytes.data(), size);
}

AtariGame::AtariGame(const AtariOptions& options)
    : options_(options),
      ale_(std::make_unique<ale::ALEInterface>()),
      resize_(210, 160, options.screen_size, options.screen_size) {
  if (options.frame_skip < 1 || options.noop_max < 0 || options.stack_num < 1 ||
      options.screen_size < 1) {
    throw std::invalid_argument(
        "frame_skip, stack_num and screen_size must be >= 1 and noop_max >= "
        "0");
  }
  ale::Logger::setMode(ale::Logger::Error);
  ale_->setInt("random_seed", options.ale_seed);
  ale_->setFloat("repeat_action_probability",
                 options.repeat_action_probability);
  ale_->setInt("max_num_frames_per_episode",
               options.max_num_frames_per_episode);
  // ALE ends the process on a missing ROM: looked for first.
  if (!std::ifstream(options.rom_path, std::ios::binary)) {
    throw std::runtime_error("no ROM at " + options.rom_path);
  }
  try {
    ale_->loadROM(options.rom_path);
  } catch (const std::exception& e) {
    throw std::runtime_error("cannot load the ROM " + options.rom_path + ": " +
                             e.what());
  }
  for (const ale::Action a : ale_->getMinimalActionSet()) {
    actions_.push_back(static_cast<int>(a));
    fire_ = fire_ || a == ale::PLAYER_A_FIRE;
  }
  fire_ = fire_ && options.fire_reset;
  if (actions_.empty() || actions_[0] != ale::PLAYER_A_NOOP) {
    throw std::runtime_error("the game's first action is not NOOP");
  }
  const ale::ALEScreen& screen = ale_->getScreen();
  height_ = static_cast<int>(screen.height());
  width_ = static_cast<int>(screen.width());
  if (height_ != 210 || width_ != 160) {
    throw std::runtime_error("the game's screen is not 210x160");
  }
  for (auto& s : screens_) s.assign(static_cast<size_t>(height_) * width_, 0);
  uint8_t indices[256];
  for (int i = 0; i < 256; ++i) indices[i] = static_cast<uint8_t>(i);
  ale_->theOSystem->colourPalette().applyPaletteGrayscale(grey_, indices, 256);
  const size_t size = static_cast<size_t>(options.screen_size) *
                      static_cast<size_t>(options.screen_size);
  frame_.assign(size, 0);
  stack_.assign(size * options.stack_num, 0);
}

AtariGame::~AtariGame() = default;

int64_t AtariGame::observation_size() const {
  return static_cast<int64_t>(stack_.size());
}

AtariGame::LifeStep AtariGame::Frames(int action) {
  const ale::Action code = static_cast<ale::Action>(actions_[action]);
  LifeStep step;
  const int skip = options_.frame_skip;
  for (int t = 0; t < skip; ++t) {
    step.reward += ale_->act(code, 1.0f);
    step.terminated = ale_->game_over(/*with_truncation=*/false);
    step.truncated = ale_->game_truncated();
    if (step.terminated || step.truncated) break;
    if (t == skip - 2) {
      // Its indices (a copy: the next frame overwrites ALE's screen),
      // greyed in Frame()'s pass.
      std::memcpy(screens_[1].data(), ale_->getScreen().getArray(),
                  screens_[1].size());
      prev_read_ = true;
    } else if (t == skip - 1) {
      last_indices_ = ale_->getScreen().getArray();
    }
  }
  return step;
}

void AtariGame::Frame() {
  // The bridge's (Gymnasium's AtariPreprocessing): the max of the step's
  // last two frames, into the buffer that keeps the last max. A step the
  // game ended early read at most the second-to-last frame: its max with
  // the last max. One that read neither changes nothing (the last max is
  // at least the last second-to-last frame everywhere).
  const int64_t n = static_cast<int64_t>(screens_[0].size());
  uint8_t* newer = screens_[0].data();
  const uint8_t* prev = screens_[1].data();
  if (last_indices_ != nullptr && prev_read_) {
    for (int64_t i = 0; i < n; ++i) {
      newer[i] = std::max(grey_[last_indices_[i]], grey_[prev[i]]);
    }
  } else if (last_indices_ != nullptr) {  // frame_skip 1
    for (int64_t i = 0; i < n; ++i) newer[i] = grey_[last_indices_[i]];
  } else if (prev_read_) {
    for (int64_t i = 0; i < n; ++i) {
      newer[i] = std::max(newer[i], grey_[prev[i]]);
    }
  }
  last_indices_ = nullptr;
  prev_read_ = false;
  resize_.Apply(newer, frame_.data());
}

void AtariGame::NewGame(Rng& rng) {
  ale_->reset_game();
  int noops = 0;
  if (options_.noop_max > 0) {
    noops = std::uniform_int_distribution<int>(1, options_.noop_max)(rng);
  }
  const ale::Action noop = static_cast<ale::Action>(actions_[0]);
  for (int i = 0; i < noops; ++i) {
    ale_->act(noop, 1.0f);
    if (ale_->game_over(/*with_truncation=*/false) || ale_->game_truncated()) {
      ale_->reset_game();
    }
  }
  ale_->getScreenGrayscale(screens_[0]);
  std::fill(screens_[1].begin(), screens_[1].end(), 0);
  return_ = 0;
  length_ = 0;
  Frame();
}

AtariGame::LifeStep AtariGame::OneLifeStep(int action) {
  LifeStep step = Frames(action);
  Frame();
  return_ += step.reward;
  ++length_;
  step.game_over = step.terminated || step.truncated;
  game_over_ = step.game_over;
  if (options_.episodic_life) {
    const int lives = ale_->lives();
    if (0 < lives && lives < lives_) step.terminated = true;
    lives_ = lives;
  }
  return step;
}

void AtariGame::LifeReset(Rng& rng) {
  if (game_over_ || !options_.episodic_life) {
    NewGame(rng);
  } else {
    const LifeStep step = OneLifeStep(0);
    if (step.terminated || step.truncated) NewGame(rng);
  }
  game_over_ = false;
  lives_ = ale_->lives();
}

void AtariGame::Reset(Rng& rng, uint8_t* obs) {
  LifeReset(rng);
  if (fire_) {
    for (const int action : {1, 2}) {
      const LifeStep step = OneLifeStep(action);
      if (step.terminated || step.truncated) LifeReset(rng);
    }
  }
  for (int k = 0; k < options_.stack_num; ++k) {
    std::copy(frame_.begin(), frame_.end(), stack_.begin() + k * frame_.size());
  }
  std::copy(stack_.begin(), stack_.end(), obs);
}

void AtariGame::Push(uint8_t* obs) {
  std::copy(stack_.begin() + frame_.size(), stack_.end(), stack_.begin());
  std::copy(frame_.begin(), frame_.end(), stack_.end() - frame_.size());
  std::copy(stack_.begin(), stack_.end(), obs);
}

AtariStep AtariGame::Step(int action, Rng& rng, uint8_t* obs) {
  if (action < 0 || action >= num_actions()) {
    throw std::out_of_range("action " + std::to_string(action) +
                            " is not one of the game's " +
                            std::to_string(num_actions()));
  }
  const LifeStep step = OneLifeStep(action);
  AtariStep out;
  out.reward = static_cast<float>(step.reward);
  if (options_.reward_clip) {
    out.reward = step.reward > 0 ? 1.0f : step.reward < 0 ? -1.0f : 0.0f;
  }
  out.terminated = step.terminated;
  out.truncated = step.truncated;
  // The game's figures stand until the next reset starts a new one.
  out.game_over = step.game_over;
  if (step.game_over) {
    out.game_return = return_;
    out.game_length = length_;
  }
  Push(obs);
  return out;
}

void AtariGame::SaveState(std::string* out) {
  PutString(out, ale_->cloneState(/*include_rng=*/true).serialize());
  for (const auto& screen : screens_) {
    PutBytes(out, screen.data(), screen.size());
  }
  PutBytes(out, frame_.data(), frame_.size());
  PutBytes(out, stack_.data(), stack_.size());
  PutBytes(out, &lives_, sizeof(lives_));
  const uint8_t game_over = game_over_ ? 1 : 0;
  PutBytes(out, &game_over, sizeof(game_over));
  PutBytes(out, &return_, sizeof(return_));
  PutBytes(out, &length_, sizeof(length_));
}

void AtariGame::RestoreState(std::string_view* in) {
  const std::string ale_state = GetString(in);
  for (auto& screen : screens_) GetBytes(in, screen.data(), screen.size());
  GetBytes(in, frame_.data(), frame_.size());
  GetBytes(in, stack_.data(), stack_.size());
  GetBytes(in, &lives_, sizeof(lives_));
  uint8_t game_over = 0;
  GetBytes(in, &game_over, sizeof(game_over));
  game_over_ = game_over != 0;
  GetBytes(in, &return_, sizeof(return_));
  GetBytes(in, &length_, sizeof(length_));
  ale_->restoreState(ale::ALEState(ale_state));
}

}  // namespace rl::atari
