#include "envs/atari/frame_ops.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

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
                 static_cast<double>(src_height) / dst_height)) {
  std::vector<int> count(dst_width_, 0);
  for (const Tap& x : xtab_) ++count[x.dst];
  for (int c : count) column_taps_ = std::max(column_taps_, c);
  if (column_taps_ > kMaxTaps) {
    throw std::invalid_argument(
        "AreaResize: a destination column covers more than 4 source columns "
        "(a downscale by more than 3)");
  }
  column_src_.assign(static_cast<size_t>(dst_width_) * column_taps_, -1);
  column_weight_.assign(column_src_.size(), 0.0f);
  std::fill(count.begin(), count.end(), 0);
  for (const Tap& x : xtab_) {
    const size_t at =
        static_cast<size_t>(x.dst) * column_taps_ + count[x.dst]++;
    column_src_[at] = x.src;
    column_weight_[at] = x.weight;
  }
  for (int dx = 0; dx < dst_width_; ++dx) {
    for (int k = 1; k < column_taps_; ++k) {
      const size_t at = static_cast<size_t>(dx) * column_taps_ + k;
      if (column_src_[at] < 0) column_src_[at] = column_src_[at - k];
    }
  }
}

namespace {

// saturate_cast<uchar>(float): round half to even (the default rounding
// mode), clamped to [0, 255].
inline uint8_t SaturateByte(float v) {
#if defined(__SSE__)
  const int r = _mm_cvt_ss2si(_mm_set_ss(v));
#else
  const long r = std::lrint(v);
#endif
  return static_cast<uint8_t>(r < 0 ? 0 : r > 255 ? 255 : r);
}

// One source row's horizontal sums: buf[dx] = ((0 + f[at0] w0) + f[at1] w1)
// + ..., `taps` a column (kTaps when known at compile time: unrolled).
template <int kTaps>
void HorizontalSums(const float* f, const int* at, const float* w, int taps,
                    int dst_width, float* buf) {
  const int n = kTaps > 0 ? kTaps : taps;
  for (int dx = 0; dx < dst_width; ++dx, at += n, w += n) {
    float acc = 0.0f;
    for (int k = 0; k < n; ++k) acc += f[at[k]] * w[k];
    buf[dx] = acc;
  }
}

}  // namespace

void AreaResize::Apply(const uint8_t* src, uint8_t* dst) const {
  // OpenCV's ResizeArea_Invoker<uchar, float> over all rows at once: a
  // source row's horizontal sums (each destination column's taps added in
  // order from 0), then the rows' weighted sum. A source row two
  // destination rows share is summed once.
  thread_local std::vector<float> row, buf, sum;
  row.resize(src_width_);
  buf.resize(dst_width_);
  sum.assign(dst_width_, 0.0f);
  const auto store = [&](int dy) {
    uint8_t* row = dst + static_cast<int64_t>(dy) * dst_width_;
    for (int dx = 0; dx < dst_width_; ++dx) row[dx] = SaturateByte(sum[dx]);
  };
  const int taps = column_taps_;
  const int* column_src = column_src_.data();
  const float* column_weight = column_weight_.data();
  int summed_row = -1;
  int prev_dy = ytab_.empty() ? 0 : ytab_.front().dst;
  for (const Tap& y : ytab_) {
    if (y.src != summed_row) {
      // The row as floats once (uint8 x float converts the byte to float
      // first: the same products).
      const uint8_t* s = src + static_cast<int64_t>(y.src) * src_width_;
      for (int x = 0; x < src_width_; ++x) row[x] = s[x];
      if (taps == 3) {
        HorizontalSums<3>(row.data(), column_src, column_weight, taps,
                          dst_width_, buf.data());
      } else {
        HorizontalSums<0>(row.data(), column_src, column_weight, taps,
                          dst_width_, buf.data());
      }
      summed_row = y.src;
    }
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
