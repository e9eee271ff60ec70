// The CUDA build of pixel_breakout.cc: nvcc compiles the same file, and
// rl_device_env.hpp adds the kernels over its per-env functions.
#include "pixel_breakout.cc"
