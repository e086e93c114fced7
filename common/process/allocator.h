// The allocator policy of every tern process: freed memory stays in the
// process instead of going back to the kernel.
//
// Why: a training step allocates and frees the same large buffers every
// step (payloads, decoded pushes, protobuf strings, gRPC slices, autograd
// tensors). glibc's defaults hand large freed blocks back to the kernel
// (munmap above the mmap threshold, trimming the heap top above the trim
// threshold, and one heap per thread's arena), so the next step faults the
// same amount in again as fresh, zeroed pages. On a virtual machine a page
// fault can cost more than copying the page: `tern bench kernels` measured
// the fp32 encode of 2^24 floats into a fresh payload at 0.02 of memcpy
// with the defaults and 0.94 with this policy (tern/README.md, "Memory").
#ifndef TERN_COMMON_PROCESS_ALLOCATOR_H_
#define TERN_COMMON_PROCESS_ALLOCATOR_H_

namespace tern::process {

// Blocks below this come from the heap, not from a fresh mapping.
inline constexpr int kMmapThresholdBytes = 512 << 20;
// Free memory at a heap's top is kept up to this much.
inline constexpr int kTrimThresholdBytes = 1 << 30;
// One arena: threads share the heap whose pages are already faulted in
// (glibc's per-thread cache still serves small blocks without its lock).
inline constexpr int kArenaMax = 1;

// Applies the policy above with mallopt, unless the environment already
// configures glibc's allocator (GLIBC_TUNABLES or any MALLOC_* variable):
// the user's settings then win. Returns false when it left the allocator
// alone or glibc refused a value. Call it first thing in main, before any
// thread starts.
bool KeepFreedMemory();

}  // namespace tern::process

#endif  // TERN_COMMON_PROCESS_ALLOCATOR_H_
