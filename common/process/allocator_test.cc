#include "common/process/allocator.h"

#include <sys/resource.h>

#include <cstdlib>
#include <cstring>

#include "gtest/gtest.h"

namespace tern::process {
namespace {

// ASan and TSan bring allocators of their own, which mallopt does not set.
// (GCC names them with macros, Clang with __has_feature.)
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TERN_SANITIZER_ALLOCATOR 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TERN_SANITIZER_ALLOCATOR 1
#endif
#endif
#ifdef TERN_SANITIZER_ALLOCATOR
constexpr bool kSanitizerAllocator = true;
#else
constexpr bool kSanitizerAllocator = false;
#endif

constexpr size_t kBlockBytes = 64 << 20;  // above glibc's default mmap cap
constexpr long kPageBytes = 4096;

long MinorFaults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// Page faults taken while a block of kBlockBytes is allocated, written
// and freed.
long FaultsOfOneBlock() {
  const long before = MinorFaults();
  char* block = static_cast<char*>(std::malloc(kBlockBytes));
  std::memset(block, 1, kBlockBytes);
  // Read it back, so that the writes cannot be elided.
  long sum = 0;
  for (size_t i = 0; i < kBlockBytes; i += kPageBytes) sum += block[i];
  EXPECT_EQ(sum, static_cast<long>(kBlockBytes / kPageBytes));
  std::free(block);
  return MinorFaults() - before;
}

TEST(KeepFreedMemoryTest, AFreedBlockIsReusedWithoutFreshPages) {
  if (kSanitizerAllocator) {
    GTEST_SKIP() << "a sanitizer's allocator replaces glibc's here";
  }
  if (std::getenv("GLIBC_TUNABLES") != nullptr) {
    GTEST_SKIP() << "GLIBC_TUNABLES configures the allocator here";
  }
  ASSERT_TRUE(KeepFreedMemory());
  const long pages = kBlockBytes / kPageBytes;
  // The first block faults its pages in; the next ones reuse them.
  EXPECT_GT(FaultsOfOneBlock(), pages / 2);
  const long again = FaultsOfOneBlock();
  EXPECT_LT(again, pages / 20)
      << "a block of " << pages << " pages allocated a second time";
}

TEST(KeepFreedMemoryTest, TheEnvironmentsAllocatorSettingsWin) {
  ASSERT_EQ(setenv("MALLOC_ARENA_MAX", "4", 1), 0);
  EXPECT_FALSE(KeepFreedMemory());
  unsetenv("MALLOC_ARENA_MAX");
}

}  // namespace
}  // namespace tern::process
