#include "envs/atari/frame_ops.h"

#include <algorithm>
#include <cmath>

namespace rl {

void MaxFrames(const uint8_t* a, const uint8_t* b, uint8_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = std::max(a[i], b[i]);
}

// OpenCV's computeResizeAreaTab (imgproc/src/resize.cpp), one channel.
std::vector<AreaResize::Tap> AreaResize::Taps(int src_size, int dst_size,
                                              double scale) {
  std::vector<Tap> taps;
  for (int dx = 0; dx < dst_size; ++dx) {
    const double fsx1 = dx * scale;
    const double fsx2 = fsx1 + scale;
    const double cell = std::min(scale, src_size - fsx1);
    int sx1 = static_cast<int>(std::ceil(fsx1));
    int sx2 = static_cast<int>(std::floor(fsx2));
    sx2 = std::min(sx2, src_size - 1);
    sx1 = std::min(sx1, sx2);
    if (sx1 - fsx1 > 1e-3) {
      taps.push_back({dx, sx1 - 1, static_cast<float>((sx1 - fsx1) / cell)});
    }
    for (int sx = sx1; sx < sx2; ++sx) {
      taps.push_back({dx, sx, static_cast<float>(1.0 / cell)});
    }
    if (fsx2 - sx2 > 1e-3) {
      taps.push_back({dx, sx2,
                      static_cast<float>(
                          std::min(std::min(fsx2 - sx2, 1.0), cell) / cell)});
    }
  }
  return taps;
}

AreaResize::AreaResize(int src_height, int src_width, int dst_height,
                       int dst_width)
    : src_height_(src_height),
      src_width_(src_width),
      dst_height_(dst_height),
      dst_width_(dst_width),
      xtab_(Taps(src_width, dst_width,
                 static_cast<double>(src_width) / dst_width)),
      ytab_(Taps(src_height, dst_height,
                 static_cast<double>(src_height) / dst_height)) {}

void AreaResize::Apply(const uint8_t* src, uint8_t* dst) const {
  // OpenCV's ResizeArea_Invoker<uchar, float> over all rows at once.
  std::vector<float> buf(dst_width_), sum(dst_width_, 0.0f);
  // saturate_cast<uchar>(float): round half to even (lrintf in the default
  // rounding mode), clamped to [0, 255].
  const auto store = [&](int dy) {
    uint8_t* row = dst + static_cast<int64_t>(dy) * dst_width_;
    for (int dx = 0; dx < dst_width_; ++dx) {
      const long v = std::lrint(sum[dx]);
      row[dx] = static_cast<uint8_t>(std::clamp(v, 0L, 255L));
    }
  };
  int prev_dy = ytab_.empty() ? 0 : ytab_.front().dst;
  for (const Tap& y : ytab_) {
    const uint8_t* s = src + static_cast<int64_t>(y.src) * src_width_;
    std::fill(buf.begin(), buf.end(), 0.0f);
    for (const Tap& x : xtab_) buf[x.dst] += s[x.src] * x.weight;
    const float beta = y.weight;
    if (y.dst != prev_dy) {
      store(prev_dy);
      for (int dx = 0; dx < dst_width_; ++dx) sum[dx] = beta * buf[dx];
      prev_dy = y.dst;
    } else {
      for (int dx = 0; dx < dst_width_; ++dx) sum[dx] += beta * buf[dx];
    }
  }
  if (!ytab_.empty()) store(prev_dy);
}

}  // namespace rl
