// RL_HOST_DEVICE marks a function that runs on the CPU and, compiled by
// nvcc, inside CUDA kernels: one definition, tested on the CPU path.
#ifndef RL_COMMON_HOST_DEVICE_H_
#define RL_COMMON_HOST_DEVICE_H_

#if defined(__CUDACC__)
#define RL_HOST_DEVICE __host__ __device__
#else
#define RL_HOST_DEVICE
#endif

#endif  // RL_COMMON_HOST_DEVICE_H_
