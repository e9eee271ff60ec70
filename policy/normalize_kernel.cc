#include "policy/normalize_kernel.h"

namespace rl {

void NormalizeBatchCpu(const float* x, const float* mean, const float* var,
                       float* y, int64_t num_rows, int64_t dim,
                       NormalizeParams params) {
  for (int64_t r = 0; r < num_rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    for (int64_t j = 0; j < dim; ++j) {
      yr[j] = NormalizeElement(xr[j], mean[j], var[j], params);
    }
  }
}

}  // namespace rl
