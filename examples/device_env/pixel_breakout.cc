// PixelBreakout-v0: a Breakout-like game written once for the host and the
// GPU through the device environment ABI (envs/plugin_api/rl_device_env.h).
// g++ builds its host table (every machine runs and tests it); nvcc, given
// this same file (pixel_breakout.cu includes it), adds the CUDA kernels, and
// the env's state, frames, rewards and flags then never leave the GPU.
//
// The game: a 36x36 screen, a wall of 3 rows x 6 bricks near the top, a
// paddle on row 33 moved left or right (or kept) each step, a 2x2 ball that
// bounces off the walls, the bricks (+1 each) and the paddle (the further
// from its centre it hits, the more sideways it leaves). A cleared wall is
// built again. The episode ends when the ball, missed by the paddle, leaves
// the bottom of the screen, or is cut at max_episode_steps (kwargs cannot
// change the screen, so runs compare).
// Observations: uint8 [2, 36, 36], the current frame and the one before
// (the ball's direction). Positions are fixed-point integers (1/16 pixel),
// so the host and the GPU compute the very same episodes.
//
// Kwargs: paddle_width (pixels, 4-16, default 8).
#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "rl_device_env.hpp"

namespace {

struct PixelBreakout {
  static constexpr const char* kName = "pixel_breakout 1.0";
  static constexpr int kSize = 36;  // screen side, pixels
  static constexpr int kFrame = kSize * kSize;
  static constexpr int kUnit = 16;  // fixed-point units per pixel
  static constexpr int kCols = 6, kRows = 3;
  static constexpr int kBrickW = 6, kBrickH = 2, kWallTop = 6;
  static constexpr int kPaddleRow = 33;
  static constexpr int kPaddleSpeed = 2 * kUnit;
  static constexpr int kBallSpeedY = kUnit;  // one pixel a step downwards
  static constexpr int kMaxSpeedX = 24;      // 1.5 pixels a step
  static constexpr int kMinSpeedX = 4;       // off the paddle
  static constexpr int kDefaultMaxSteps = 2000;

  enum Field { kBall, kPaddle, kBricks, kCounters, kEpisode, kReturn };
  // kBall: x, y, vx, vy, previous x, previous y (units).
  // kPaddle: left edge, previous left edge (units).
  // kCounters: steps this episode, bricks left.

  struct Params {
    int paddle_width;  // units
    int max_steps;
  };

  static Params Configure(const rl_env_options& options,
                          const rlenv::Kwargs& kwargs, rlenv::Spaces* spaces,
                          rldev::Layout* layout) {
    if (std::string(options.env_id) != "PixelBreakout-v0") {
      throw std::invalid_argument(std::string("env id ") + options.env_id +
                                  ": this library serves PixelBreakout-v0");
    }
    for (const std::string& key : kwargs.Keys()) {
      if (key != "paddle_width") {
        throw std::invalid_argument("kwargs." + key +
                                    ": unknown (PixelBreakout-v0 takes "
                                    "paddle_width)");
      }
    }
    const int64_t width = kwargs.Int("paddle_width", 8);
    if (width < 4 || width > 16) {
      throw std::invalid_argument("kwargs.paddle_width: must be 4-16 (got " +
                                  std::to_string(width) + ")");
    }
    spaces->observation = rlenv::Space::Bytes({2, kSize, kSize});
    spaces->action = rlenv::Space::Discrete(3);  // keep, left, right
    spaces->reward_low = 0;
    spaces->reward_high = 1;
    layout->Add("ball", RL_FIELD_INT32, 6);
    layout->Add("paddle", RL_FIELD_INT32, 2);
    layout->Add("bricks", RL_FIELD_UINT8, kCols * kRows);
    layout->Add("counters", RL_FIELD_INT32, 2);
    layout->Add("episode", RL_FIELD_INT64, 1);
    layout->Add("return", RL_FIELD_FLOAT32, 1);
    Params p;
    p.paddle_width = static_cast<int>(width) * kUnit;
    p.max_steps = options.max_episode_steps > 0 ? options.max_episode_steps
                                                : kDefaultMaxSteps;
    return p;
  }

  RLDEV_HD static void Reset(const Params& p, const rldev::Row& row,
                             const rl_env_buffers& out) {
    row.Get<int64_t>(kEpisode)[0] = 0;
    StartEpisode(p, row);
    Render(p, row, Observation(out.observations, row.r));
  }

  RLDEV_HD static void Step(const Params& p, const rldev::Row& row,
                            const void* actions, const rl_env_buffers& out) {
    const int64_t action = static_cast<const int64_t*>(actions)[row.r];
    int32_t* ball = row.Get<int32_t>(kBall);
    int32_t* paddle = row.Get<int32_t>(kPaddle);
    int32_t* counters = row.Get<int32_t>(kCounters);
    uint8_t* bricks = row.Get<uint8_t>(kBricks);
    paddle[1] = paddle[0];
    const int move = action == 1   ? -kPaddleSpeed
                     : action == 2 ? kPaddleSpeed
                                   : 0;
    paddle[0] = Clamp(paddle[0] + move, 0, kSize * kUnit - p.paddle_width);
    ball[4] = ball[0];
    ball[5] = ball[1];
    int x = ball[0] + ball[2], y = ball[1] + ball[3];
    const int right = (kSize - 2) * kUnit;  // the ball is 2 pixels wide
    if (x < 0) {
      x = -x;
      ball[2] = -ball[2];
    }
    if (x > right) {
      x = 2 * right - x;
      ball[2] = -ball[2];
    }
    if (y < 0) {
      y = -y;
      ball[3] = -ball[3];
    }
    float reward = 0;
    // A brick under the ball's centre breaks and turns the ball back.
    const int cx = (x + kUnit) / kUnit, cy = (y + kUnit) / kUnit;
    const int col = cx / kBrickW, brick_row = (cy - kWallTop) / kBrickH;
    if (cy >= kWallTop && brick_row < kRows && col >= 0 && col < kCols &&
        bricks[brick_row * kCols + col] != 0) {
      bricks[brick_row * kCols + col] = 0;
      reward = 1;
      ball[3] = -ball[3];
      if (--counters[1] == 0) {
        for (int k = 0; k < kCols * kRows; ++k) bricks[k] = 1;
        counters[1] = kCols * kRows;
      }
    }
    // The paddle's top is row kPaddleRow: the ball's bottom (y + 2 px)
    // crossing it over the paddle bounces.
    const int top = (kPaddleRow - 2) * kUnit;
    if (ball[3] > 0 && y >= top && ball[1] < top) {
      const int centre = x + kUnit;
      if (centre >= paddle[0] - kUnit &&
          centre <= paddle[0] + p.paddle_width + kUnit) {
        y = 2 * top - y;
        ball[3] = -ball[3];
        // Never straight up: at least a quarter pixel a step sideways, on
        // the side it hit (or on its way where it hit the very centre).
        const int offset = centre - (paddle[0] + p.paddle_width / 2);
        const int side = offset != 0 ? offset : ball[2] >= 0 ? 1 : -1;
        int vx = Clamp(offset * kMaxSpeedX * 2 / p.paddle_width, -kMaxSpeedX,
                       kMaxSpeedX);
        if (vx > -kMinSpeedX && vx < kMinSpeedX) {
          vx = side > 0 ? kMinSpeedX : -kMinSpeedX;
        }
        ball[2] = vx;
      }
    }
    ball[0] = x;
    ball[1] = y;
    const bool terminated = y > kSize * kUnit;
    const bool truncated = !terminated && counters[0] + 1 >= p.max_steps;
    counters[0] += 1;
    float* episode_return = row.Get<float>(kReturn);
    *episode_return += reward;
    out.rewards[row.r] = reward;
    out.terminated[row.r] = terminated ? 1 : 0;
    out.truncated[row.r] = truncated ? 1 : 0;
    if (out.episode_returns != nullptr) {
      out.episode_returns[row.r] =
          terminated || truncated ? *episode_return : 0.0f;
    }
    if (out.episode_lengths != nullptr) {
      out.episode_lengths[row.r] = terminated || truncated ? counters[0] : 0;
    }
    if (terminated || truncated) {
      if (out.final_observations != nullptr) {
        Render(p, row, Observation(out.final_observations, row.r));
      }
      row.Get<int64_t>(kEpisode)[0] += 1;
      StartEpisode(p, row);
    }
    Render(p, row, Observation(out.observations, row.r));
  }

 private:
  RLDEV_HD static int Clamp(int v, int low, int high) {
    return v < low ? low : v > high ? high : v;
  }

  RLDEV_HD static uint8_t* Observation(void* observations, int64_t r) {
    return static_cast<uint8_t*>(observations) + r * 2 * kFrame;
  }

  // A new ball over the middle of the screen, falling, its sideways speed
  // and column drawn from (seed, env, episode).
  RLDEV_HD static void StartEpisode(const Params& p, const rldev::Row& row) {
    const uint64_t episode =
        static_cast<uint64_t>(row.Get<int64_t>(kEpisode)[0]);
    const double u0 = rldev::Uniform(row.seed, row.env, episode, 0);
    const double u1 = rldev::Uniform(row.seed, row.env, episode, 1);
    int32_t* ball = row.Get<int32_t>(kBall);
    ball[0] = (8 + static_cast<int>(u0 * 18)) * kUnit;
    ball[1] = 16 * kUnit;
    // kMinSpeedX..kMaxSpeedX to the right or to the left.
    const int span = kMaxSpeedX - kMinSpeedX + 1;
    const int draw = static_cast<int>(u1 * 2 * span);
    ball[2] = draw < span ? kMinSpeedX + draw : -(kMinSpeedX + draw - span);
    ball[3] = kBallSpeedY;
    ball[4] = ball[0];
    ball[5] = ball[1];
    int32_t* paddle = row.Get<int32_t>(kPaddle);
    paddle[0] = paddle[1] = (kSize * kUnit - p.paddle_width) / 2;
    uint8_t* bricks = row.Get<uint8_t>(kBricks);
    for (int k = 0; k < kCols * kRows; ++k) bricks[k] = 1;
    int32_t* counters = row.Get<int32_t>(kCounters);
    counters[0] = 0;
    counters[1] = kCols * kRows;
    row.Get<float>(kReturn)[0] = 0;
  }

  RLDEV_HD static void Fill(uint8_t* frame, int x0, int y0, int w, int h,
                            uint8_t value) {
    for (int y = y0 < 0 ? 0 : y0; y < y0 + h && y < kSize; ++y) {
      for (int x = x0 < 0 ? 0 : x0; x < x0 + w && x < kSize; ++x) {
        frame[y * kSize + x] = value;
      }
    }
  }

  // Channel 0: the bricks, the paddle and the ball now; channel 1: the
  // same bricks with the paddle and the ball a step before.
  RLDEV_HD static void Render(const Params& p, const rldev::Row& row,
                              uint8_t* obs) {
    const int32_t* ball = row.Get<int32_t>(kBall);
    const int32_t* paddle = row.Get<int32_t>(kPaddle);
    const uint8_t* bricks = row.Get<uint8_t>(kBricks);
    for (int c = 0; c < 2; ++c) {
      uint8_t* frame = obs + c * kFrame;
      for (int k = 0; k < kFrame; ++k) frame[k] = 0;
      for (int b = 0; b < kCols * kRows; ++b) {
        if (bricks[b] == 0) continue;
        Fill(frame, (b % kCols) * kBrickW, kWallTop + (b / kCols) * kBrickH,
             kBrickW - 1, kBrickH, 128);
      }
      Fill(frame, paddle[c] / kUnit, kPaddleRow, p.paddle_width / kUnit, 1,
           200);
      Fill(frame, ball[4 * c] / kUnit, ball[4 * c + 1] / kUnit, 2, 2, 255);
    }
  }
};

}  // namespace

RL_DEVICE_ENV_PLUGIN(PixelBreakout)
