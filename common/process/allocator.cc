#include "common/process/allocator.h"

#include <malloc.h>

#include <cstring>

extern char** environ;

namespace tern::process {
namespace {

bool EnvironmentConfiguresAllocator() {
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    if (std::strncmp(*entry, "GLIBC_TUNABLES=", 15) == 0 ||
        std::strncmp(*entry, "MALLOC_", 7) == 0) {
      return true;
    }
  }
  return false;
}

}  // namespace

bool KeepFreedMemory() {
  if (EnvironmentConfiguresAllocator()) return false;
  // mallopt returns 0 when glibc refuses a value; glibc's own setting of
  // that knob then stays, which is slower but correct.
  bool applied = mallopt(M_MMAP_THRESHOLD, kMmapThresholdBytes) == 1;
  applied = mallopt(M_TRIM_THRESHOLD, kTrimThresholdBytes) == 1 && applied;
  return mallopt(M_ARENA_MAX, kArenaMax) == 1 && applied;
}

}  // namespace tern::process
