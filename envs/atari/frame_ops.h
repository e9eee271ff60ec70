// The frame operations of CleanRL's / EnvPool's Atari preprocessing, on
// uint8 grey frames, written to give OpenCV's bytes: the max of the last
// two frames, and the area resize (cv::resize with INTER_AREA, which
// Gymnasium's AtariPreprocessing and EnvPool call) from 210x160 to 84x84.
#ifndef RL_ENVS_ATARI_FRAME_OPS_H_
#define RL_ENVS_ATARI_FRAME_OPS_H_

#include <cstdint>
#include <vector>

namespace rl {

// out[i] = max(a[i], b[i]) for i < n (out may be a or b).
void MaxFrames(const uint8_t* a, const uint8_t* b, uint8_t* out, int64_t n);

// OpenCV's INTER_AREA downscale of a one-channel image, byte for byte,
// where the scale is not a whole number in both directions (OpenCV takes a
// fast path of whole blocks there, which this does not copy; 210x160 to
// 84x84 is 2.5 x 1.905): each destination pixel is the area-weighted mean
// of the source pixels it covers, accumulated in float in OpenCV's order (a
// source row's horizontal sums, then the rows' weighted sum) and rounded
// half to even. Made once per shape; Apply is thread-safe.
class AreaResize {
 public:
  AreaResize(int src_height, int src_width, int dst_height, int dst_width);

  // `src` [src_height, src_width] row-major into `dst` [dst_height,
  // dst_width].
  void Apply(const uint8_t* src, uint8_t* dst) const;

 private:
  struct Tap {
    int dst;  // destination column (or row)
    int src;  // source column (or row)
    float weight;
  };
  static std::vector<Tap> Taps(int src_size, int dst_size, double scale);

  int src_height_, src_width_, dst_height_, dst_width_;
  std::vector<Tap> xtab_, ytab_;
  // xtab_ by destination column, kMaxTaps a column (unused taps weigh 0
  // and read the column's first source pixel): a gather per column in
  // xtab_'s order instead of a scatter, the same float operations.
  static constexpr int kMaxTaps = 4;
  int column_taps_ = 0;  // taps a column, at most kMaxTaps
  std::vector<int> column_src_;
  std::vector<float> column_weight_;
};

}  // namespace rl

#endif  // RL_ENVS_ATARI_FRAME_OPS_H_
