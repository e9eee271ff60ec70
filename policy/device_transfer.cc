#include "policy/device_transfer.h"

#include <cstring>

namespace rl {
namespace {

constexpr int64_t kAlignment = 64;

int64_t Aligned(int64_t bytes) {
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

int64_t Bytes(const torch::Tensor& t) {
  return t.defined() ? static_cast<int64_t>(t.numel() * t.element_size()) : 0;
}

}  // namespace

torch::Tensor PackTensors(const std::vector<torch::Tensor>& host, bool pin) {
  for (const torch::Tensor& t : host) {
    TORCH_CHECK(!t.defined() || t.is_cpu(),
                "PackTensors packs host tensors; one is on ", t.device());
  }
  int64_t total = 0;
  for (const torch::Tensor& t : host) total += Aligned(Bytes(t));
  torch::Tensor packed = torch::empty(
      {std::max<int64_t>(total, 1)},
      torch::TensorOptions().dtype(torch::kUInt8).pinned_memory(pin));
  uint8_t* out = packed.data_ptr<uint8_t>();
  int64_t offset = 0;
  for (const torch::Tensor& t : host) {
    if (!t.defined()) continue;
    const torch::Tensor c = t.contiguous();
    std::memcpy(out + offset, c.data_ptr(), Bytes(c));
    offset += Aligned(Bytes(c));
  }
  return packed;
}

std::vector<torch::Tensor> UnpackTensors(
    const torch::Tensor& packed, const std::vector<torch::Tensor>& like) {
  std::vector<torch::Tensor> out;
  out.reserve(like.size());
  int64_t offset = 0;
  for (const torch::Tensor& t : like) {
    if (!t.defined()) {
      out.emplace_back();
      continue;
    }
    const int64_t bytes = Bytes(t);
    out.push_back(
        packed.narrow(0, offset, bytes).view(t.scalar_type()).view(t.sizes()));
    offset += Aligned(bytes);
  }
  return out;
}

std::vector<torch::Tensor> ToDevice(const std::vector<torch::Tensor>& host,
                                    torch::Device device) {
  if (device.is_cpu()) return host;
  for (const torch::Tensor& t : host) {
    if (t.defined() && !t.is_cpu()) {
      // Not all on the host: each one on its own (no packing of device
      // memory through the host).
      std::vector<torch::Tensor> out;
      out.reserve(host.size());
      for (const torch::Tensor& h : host) {
        out.push_back(h.defined() ? h.to(device, /*non_blocking=*/true) : h);
      }
      return out;
    }
  }
  const torch::Tensor packed = PackTensors(host, /*pin=*/device.is_cuda());
  return UnpackTensors(packed.to(device, /*non_blocking=*/true), host);
}

std::vector<torch::Tensor> ToHost(const std::vector<torch::Tensor>& device,
                                  torch::Tensor* staging) {
  std::vector<torch::Tensor> bytes;
  for (const torch::Tensor& t : device) {
    if (!t.defined()) continue;
    // Each tensor's bytes, padded to the packing's alignment.
    const torch::Tensor flat = t.contiguous().view({-1}).view(torch::kUInt8);
    bytes.push_back(flat);
    const int64_t pad = Aligned(Bytes(t)) - Bytes(t);
    if (pad > 0) bytes.push_back(torch::zeros({pad}, flat.options()));
  }
  if (bytes.empty()) return device;
  const torch::Tensor packed = torch::cat(bytes);
  torch::Tensor local;
  torch::Tensor& buffer = staging != nullptr ? *staging : local;
  if (!buffer.defined() || buffer.numel() < packed.numel()) {
    buffer =
        torch::empty({packed.numel()}, torch::TensorOptions()
                                           .dtype(torch::kUInt8)
                                           .pinned_memory(packed.is_cuda()));
  }
  torch::Tensor host = buffer.narrow(0, 0, packed.numel());
  host.copy_(packed);
  return UnpackTensors(host, device);
}

}  // namespace rl
