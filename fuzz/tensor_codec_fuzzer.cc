// Wire Tensor -> torch tensor: the layout check (no LibTorch) and both
// decoders; a tensor that decodes must encode back to the same bytes.
#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "common/tensor_codec.h"
#include "common/tensor_layout.h"
#include "fuzz/fuzz_input.h"
#include "proto/common.pb.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rl::Tensor proto;
  if (!rl::ParseFuzzInput(data, size, &proto)) return 0;
  const bool valid = rl::ValidateTensorLayout(proto).ok();
  auto view = rl::DecodeTensorView(proto);
  auto copy = rl::DecodeTensor(proto);
  // The decoders accept exactly what the layout check accepts.
  if (view.ok() != valid || copy.ok() != valid) std::abort();
  if (!valid) return 0;
  rl::Tensor again;
  if (!rl::EncodeTensor(*copy, &again).ok()) std::abort();
  if (again.dtype() != proto.dtype() || again.data() != proto.data() ||
      again.shape_size() != proto.shape_size()) {
    std::abort();
  }
  for (int i = 0; i < proto.shape_size(); ++i) {
    if (again.shape(i) != proto.shape(i)) std::abort();
  }
  return 0;
}
