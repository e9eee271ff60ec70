#include "common/process_memory.h"

#include <malloc.h>
#include <unistd.h>

#include <cstdio>

namespace rl {

int64_t ProcessRssBytes() {
  std::FILE* file = std::fopen("/proc/self/statm", "r");
  if (file == nullptr) return 0;
  long long size = 0, resident = 0;
  const int read = std::fscanf(file, "%lld %lld", &size, &resident);
  std::fclose(file);
  if (read != 2) return 0;
  return static_cast<int64_t>(resident) * sysconf(_SC_PAGESIZE);
}

bool KeepLargeBlocksInHeap() {
  // 32 MiB: the most glibc takes (half its 64 MiB thread heaps).
  const bool mmap_set = mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1;
  const bool trim_set = mallopt(M_TRIM_THRESHOLD, 512 << 20) == 1;
  return mmap_set && trim_set;
}

}  // namespace rl
