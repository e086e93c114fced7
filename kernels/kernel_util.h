// Internal to kernels/: precondition checks and little-endian word access.
#ifndef TERN_KERNELS_KERNEL_UTIL_H_
#define TERN_KERNELS_KERNEL_UTIL_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

// Aborts when a kernel's caller broke a documented precondition, such as an
// output span of the wrong size. Those sizes come from our own code, so a
// failure is a bug; bytes from the network are checked with a Status
// instead and never reach this.
#define TERN_KERNEL_CHECK(condition)                                  \
  do {                                                                \
    if (!(condition)) {                                               \
      std::fprintf(stderr, "%s:%d: kernel precondition failed: %s\n", \
                   __FILE__, __LINE__, #condition);                   \
      std::abort();                                                   \
    }                                                                 \
  } while (false)

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#endif

namespace tern::kernels {

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// True when the CPU has F16C and AVX and the OS saves the YMM registers.
// (clang 14's __builtin_cpu_supports does not know "f16c".)
inline bool CpuHasF16c() {
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  const unsigned osxsave_avx_f16c = (1u << 27) | (1u << 28) | (1u << 29);
  if ((ecx & osxsave_avx_f16c) != osxsave_avx_f16c) return false;
  unsigned xcr0_low, xcr0_high;
  __asm__("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
  return (xcr0_low & 6u) == 6u;  // XMM and YMM state
}
#endif

inline uint64_t LoadLE64(const uint8_t* bytes) {
  uint64_t word;
  std::memcpy(&word, bytes, sizeof(word));
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  word = __builtin_bswap64(word);
#endif
  return word;
}

inline void StoreLE64(uint64_t word, uint8_t* bytes) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  word = __builtin_bswap64(word);
#endif
  std::memcpy(bytes, &word, sizeof(word));
}

}  // namespace tern::kernels

#endif  // TERN_KERNELS_KERNEL_UTIL_H_
