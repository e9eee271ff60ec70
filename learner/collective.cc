#include "learner/collective.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"
#include "policy/torch_status.h"

namespace rl {

absl::Status AllReduceSumCoalesced(Collective& collective,
                                   const std::vector<torch::Tensor>& tensors) {
  if (tensors.empty()) return absl::OkStatus();
  torch::Tensor flat;
  RETURN_IF_ERROR(CatchTorchErrors("packing the all-reduce bucket", [&] {
    std::vector<torch::Tensor> parts;
    parts.reserve(tensors.size());
    for (const auto& t : tensors) {
      parts.push_back(t.detach().reshape({-1}).to(torch::kFloat64));
    }
    flat = torch::cat(parts).contiguous();
  }));
  RETURN_IF_ERROR(collective.AllReduce(flat, ReduceOp::kSum));
  return CatchTorchErrors("unpacking the all-reduce bucket", [&] {
    torch::NoGradGuard no_grad;
    int64_t offset = 0;
    for (const auto& t : tensors) {
      const int64_t n = t.numel();
      torch::Tensor target = t;
      target.copy_(flat.narrow(0, offset, n).view(t.sizes()));
      offset += n;
    }
  });
}

absl::Status BroadcastBytes(Collective& collective, std::string* bytes,
                            int root) {
  torch::Tensor size = torch::tensor(
      {static_cast<int64_t>(collective.rank() == root ? bytes->size() : 0)},
      torch::kInt64);
  RETURN_IF_ERROR(collective.Broadcast(size, root));
  const int64_t n = size.item<int64_t>();
  torch::Tensor data = torch::empty({n}, torch::kUInt8);
  if (collective.rank() == root && n > 0) {
    std::memcpy(data.data_ptr<uint8_t>(), bytes->data(), n);
  }
  if (n > 0) RETURN_IF_ERROR(collective.Broadcast(data, root));
  if (collective.rank() != root) {
    bytes->assign(reinterpret_cast<const char*>(data.data_ptr<uint8_t>()), n);
  }
  return absl::OkStatus();
}

uint64_t HashTensors(const std::vector<torch::Tensor>& tensors) {
  uint64_t h = 1469598103934665603ULL;
  for (const auto& t : tensors) {
    const torch::Tensor c = t.detach().contiguous().cpu();
    const auto* p = static_cast<const uint8_t*>(c.data_ptr());
    const size_t n = c.numel() * c.element_size();
    for (size_t i = 0; i < n; ++i) {
      h ^= p[i];
      h *= 1099511628211ULL;
    }
  }
  return h;
}

absl::Status CheckInSync(Collective& collective,
                         const std::vector<torch::Tensor>& tensors,
                         const std::string& what) {
  // Max of (h, -h) gives the largest and the smallest hash in one call.
  // The hash is split into two 32-bit halves so that int64 negation is safe.
  const uint64_t h = HashTensors(tensors);
  const int64_t hi = static_cast<int64_t>(h >> 32);
  const int64_t lo = static_cast<int64_t>(h & 0xffffffffULL);
  torch::Tensor v = torch::tensor({hi, lo, -hi, -lo}, torch::kInt64);
  RETURN_IF_ERROR(collective.AllReduce(v, ReduceOp::kMax));
  const int64_t* r = v.data_ptr<int64_t>();
  if (r[0] == -r[2] && r[1] == -r[3]) return absl::OkStatus();
  return absl::DataLossError(absl::StrFormat(
      "%s differ between the learner ranks (rank %d of %d has hash %016x; "
      "the ranks' hashes range over %08x%08x..%08x%08x): the data-parallel "
      "replicas diverged",
      what, collective.rank(), collective.world_size(), h,
      static_cast<uint32_t>(-r[2]), static_cast<uint32_t>(-r[3]),
      static_cast<uint32_t>(r[0]), static_cast<uint32_t>(r[1])));
}

}  // namespace rl
