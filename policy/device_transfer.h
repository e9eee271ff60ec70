// Host tensors to a device in one transfer: packed into one byte buffer
// (page-locked for CUDA), copied with one non-blocking host-to-device copy,
// and handed back as views of the device copy with their own dtypes and
// shapes. One copy instead of one per tensor, and no synchronisation: the
// copy is ordered before the kernels that read it on the current stream.
#ifndef RL_POLICY_DEVICE_TRANSFER_H_
#define RL_POLICY_DEVICE_TRANSFER_H_

#include <torch/types.h>

#include <vector>

namespace rl {

// `host` on `device`, in order; undefined tensors stay undefined. On the
// CPU the tensors come back as they are (no copy); tensors already on a
// device are moved one by one instead of packed.
std::vector<torch::Tensor> ToDevice(const std::vector<torch::Tensor>& host,
                                    torch::Device device);

// The other way: tensors on one device back to the host in one transfer:
// each one's bytes packed on the device (one concatenation), copied with one
// device-to-host copy into page-locked memory, and handed back as views of
// it. Waits for the copy (and so for what the stream ran before it). On the
// CPU the tensors come back as copies.
//
// `staging`, where given, is the page-locked buffer to copy into, kept from
// call to call (a ring of them, one per buffer in flight): a new one is
// allocated there only when it is undefined or too small.
std::vector<torch::Tensor> ToHost(const std::vector<torch::Tensor>& device,
                                  torch::Tensor* staging = nullptr);

// The packing itself, shared by every device and tested on the CPU: each
// defined tensor's bytes at a 64-byte aligned offset of one uint8 buffer
// (page-locked where `pin`), and the views that undo it.
torch::Tensor PackTensors(const std::vector<torch::Tensor>& host, bool pin);
std::vector<torch::Tensor> UnpackTensors(
    const torch::Tensor& packed, const std::vector<torch::Tensor>& like);

}  // namespace rl

#endif  // RL_POLICY_DEVICE_TRANSFER_H_
