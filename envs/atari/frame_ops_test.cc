#include "envs/atari/frame_ops.h"

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace rl {
namespace {

constexpr int kH = 210, kW = 160;

// tools/gen_atari_frame_golden.py's frames, made the same way.
std::vector<uint8_t> LcgFrame(uint64_t seed) {
  std::vector<uint8_t> out(kH * kW);
  uint64_t x = seed;
  for (auto& b : out) {
    x = (x * 1103515245ull + 12345ull) % (1ull << 31);
    b = static_cast<uint8_t>((x >> 16) & 255);
  }
  return out;
}

std::vector<std::vector<uint8_t>> Frames() {
  std::vector<std::vector<uint8_t>> frames{LcgFrame(1), LcgFrame(2),
                                           LcgFrame(3)};
  std::vector<uint8_t> across(kH * kW), down(kH * kW);
  for (int y = 0; y < kH; ++y) {
    for (int x = 0; x < kW; ++x) {
      across[y * kW + x] = static_cast<uint8_t>(x * 255 / (kW - 1));
      down[y * kW + x] = static_cast<uint8_t>(y * 255 / (kH - 1));
    }
  }
  frames.push_back(across);
  frames.push_back(down);
  return frames;
}

std::vector<uint8_t> Golden() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  const std::string path = std::string(srcdir ? srcdir : ".") + "/" +
                           (workspace ? workspace : "rl_service") +
                           "/envs/atari/testdata/area_resize_golden.bin";
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// Byte for byte OpenCV's cv2.resize(INTER_AREA) of the same frames, to
// 84x84 (Atari's) and 110x84.
TEST(AreaResizeTest, MatchesOpenCvByteForByte) {
  const std::vector<uint8_t> golden = Golden();
  ASSERT_EQ(golden.size(), 5u * (84 * 84 + 110 * 84))
      << "run "
         "tools/gen_atari_frame_golden.py";
  const AreaResize to84(kH, kW, 84, 84), to110(kH, kW, 110, 84);
  size_t offset = 0;
  int frame_index = 0;
  for (const std::vector<uint8_t>& frame : Frames()) {
    for (const AreaResize* resize : {&to84, &to110}) {
      const size_t n = resize == &to84 ? 84 * 84 : 110 * 84;
      std::vector<uint8_t> out(n, 0xAB);
      resize->Apply(frame.data(), out.data());
      int differ = 0;
      for (size_t i = 0; i < n; ++i) differ += out[i] != golden[offset + i];
      EXPECT_EQ(differ, 0) << "frame " << frame_index << ", " << n << " pixels";
      offset += n;
    }
    ++frame_index;
  }
}

TEST(MaxFramesTest, TakesTheBrighterPixel) {
  const std::vector<uint8_t> a{0, 7, 200, 255}, b{3, 7, 100, 0};
  std::vector<uint8_t> out(4);
  MaxFrames(a.data(), b.data(), out.data(), 4);
  EXPECT_EQ(out, (std::vector<uint8_t>{3, 7, 200, 255}));
}

}  // namespace
}  // namespace rl
