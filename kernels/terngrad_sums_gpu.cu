// CUDA twin of the server-side and pull-side TernGrad kernels (Wen et al.,
// NIPS 2017, Algorithm 1; DESIGN section 3 steps 5-6): the integer sums of
// N workers' ternary pushes, and the decoding of pulled sums
// (LAYOUT_SUM_BITS, LAYOUT_SUM_RADIX) into floats, one launch for all
// chunks. Bytes that came from the network are validated as the CPU
// decoders do; problems are reported per chunk (and per push) in error
// words, never by reading out of bounds.
//
// No Abseil here: nvcc compiles this file outside Bazel's toolchain
// (third_party/cuda.bzl); terngrad_cuda.cc wraps it.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/payload.h"
#include "kernels/sum_bits.h"
#include "kernels/ternary_math.h"
#include "kernels/terngrad_cuda_launch.h"
#include "kernels/terngrad_tile_cuda.h"

namespace tern::kernels::cuda {
namespace {

// Writes a thread's kPerThread results (elements [first, first +
// kPerThread) of a chunk of n) to out: directly, with 16-byte stores, when
// the chunk's output is aligned; otherwise through shared memory
// (tile::StageOut), so a warp still stores contiguous runs. Called by every
// thread of the CTA (it may synchronize); `active` threads own results.
template <uint32_t kPerThread, typename T>
__device__ __forceinline__ void WriteTile(const T* mine, bool active, T* out,
                                          uint64_t cta_first, uint64_t first,
                                          uint64_t n, T* stage) {
  if (tile::IsAligned(out, 16)) {
    if (active) tile::StoreValues<kPerThread>(out, first, n, mine);
    return;
  }
  if (active) {
#pragma unroll
    for (uint32_t j = 0; j < kPerThread; ++j) {
      stage[threadIdx.x * kPerThread + j] = mine[j];
    }
  }
  __syncthreads();
  tile::StageOut<kThreads, kPerThread>(stage, out, cta_first, n);
}

template <Layout kLayout>
__global__ void __launch_bounds__(kThreads)
    SumTernaryKernel(const uint8_t* const* pushes, uint32_t num_pushes,
                     const SumChunk* chunks, const uint32_t* first_cta,
                     uint32_t num_chunks, int32_t* sums, uint32_t* errors) {
  constexpr uint32_t kElements = kLayout == Layout::kTernaryBase3
                                     ? tile::kBase3Elements
                                     : tile::kTwoBitElements;
  __shared__ __align__(16) int32_t stage[kThreads * kElements];
  const uint32_t c = tile::FindChunk(first_cta, num_chunks, blockIdx.x);
  const SumChunk chunk = chunks[c];
  const uint32_t cta = blockIdx.x - first_cta[c];
  const uint64_t t = uint64_t{cta} * kThreads + threadIdx.x;
  const uint64_t first = t * kElements;
  const bool active = first < chunk.count;
  int32_t acc[kElements];
  if (active) {
    if constexpr (kLayout == Layout::kTernaryBase3) {
      tile::SumBase3Tile(pushes, num_pushes, chunk.packed_offset, chunk.count,
                         t, acc, errors + c, num_chunks);
    } else {
      tile::SumTwoBitTile(pushes, num_pushes, chunk.packed_offset, chunk.count,
                          t, acc, errors + c, num_chunks);
    }
  }
  WriteTile<kElements>(acc, active, sums + chunk.offset,
                       uint64_t{cta} * kThreads * kElements, first, chunk.count,
                       stage);
}

// One thread per 8 sums (kBits bytes); kBits = SumBits(N) is a template
// argument so that every shift and mask is a constant.
template <uint32_t kBits>
__global__ void __launch_bounds__(kThreads)
    DecodeSumBitsKernel(const uint8_t* packed, const SumChunk* chunks,
                        const uint32_t* first_cta, uint32_t num_chunks,
                        uint32_t num_summands, float* out, uint32_t* errors) {
  __shared__ __align__(16) float stage[kThreads * tile::kSumBitsElements];
  const uint32_t c = tile::FindChunk(first_cta, num_chunks, blockIdx.x);
  const SumChunk chunk = chunks[c];
  const uint32_t cta = blockIdx.x - first_cta[c];
  const uint64_t t = uint64_t{cta} * kThreads + threadIdx.x;
  const uint64_t first = t * tile::kSumBitsElements;
  const bool active = first < chunk.count;
  float v[tile::kSumBitsElements];
  if (active) {
    const float factor = DecodeFactor(chunk.scaler, num_summands);
    const uint32_t bad = tile::DecodeSumBitsTile<kBits>(
        packed + chunk.packed_offset, chunk.count, t, num_summands, factor, v);
    if (bad != 0) tile::FlagError(errors + c, bad);
  }
  WriteTile<tile::kSumBitsElements>(
      v, active, out + chunk.offset,
      uint64_t{cta} * kThreads * tile::kSumBitsElements, first, chunk.count,
      stage);
}

// One thread per 64-bit word. A word's digits are consecutive elements, so
// a thread writing its own would store with a stride of `digits` floats
// across the warp; the CTA stages its values in shared memory and stores
// them contiguously instead.
__global__ void __launch_bounds__(kRadixThreads)
    DecodeSumRadixKernel(const uint8_t* packed, const SumChunk* chunks,
                         const uint32_t* first_cta, uint32_t num_chunks,
                         uint32_t num_summands, tile::RadixParams radix,
                         float* out, uint32_t* errors) {
  __shared__ float staged[kRadixThreads * tile::kMaxRadixDigits];
  const uint32_t c = tile::FindChunk(first_cta, num_chunks, blockIdx.x);
  const SumChunk chunk = chunks[c];
  const uint32_t cta = blockIdx.x - first_cta[c];
  const uint64_t num_words = (chunk.count + radix.digits - 1) / radix.digits;
  const uint64_t w = uint64_t{cta} * kRadixThreads + threadIdx.x;
  if (w < num_words) {
    const float factor = DecodeFactor(chunk.scaler, num_summands);
    const uint32_t bad = tile::DecodeRadixWord(
        packed + chunk.packed_offset, chunk.count, w, radix, num_summands,
        factor, staged + threadIdx.x * radix.digits);
    if (bad != 0) tile::FlagError(errors + c, bad);
  }
  __syncthreads();
  const uint64_t first = uint64_t{cta} * kRadixThreads * radix.digits;
  const uint64_t rest = chunk.count - first;
  const uint32_t count =
      static_cast<uint32_t>(rest < uint64_t{kRadixThreads} * radix.digits
                                ? rest
                                : uint64_t{kRadixThreads} * radix.digits);
  float* chunk_out = out + chunk.offset + first;
  for (uint32_t i = threadIdx.x; i < count; i += kRadixThreads) {
    chunk_out[i] = staged[i];
  }
}

template <uint32_t kBits>
void LaunchSumBits(const uint8_t* packed, const SumChunk* chunks,
                   const uint32_t* first_cta, uint32_t num_chunks,
                   uint32_t num_ctas, uint32_t num_summands, float* out,
                   uint32_t* errors, cudaStream_t stream) {
  DecodeSumBitsKernel<kBits><<<num_ctas, kThreads, 0, stream>>>(
      packed, chunks, first_cta, num_chunks, num_summands, out, errors);
}

}  // namespace

cudaError_t LaunchSumTernary(const uint8_t* const* pushes, uint32_t num_pushes,
                             const SumChunk* chunks, const uint32_t* first_cta,
                             uint32_t num_chunks, uint32_t num_ctas,
                             Layout layout, int32_t* sums, uint32_t* errors,
                             cudaStream_t stream) {
  if (num_ctas == 0) return cudaSuccess;
  if (layout == Layout::kTernary2Bit) {
    SumTernaryKernel<Layout::kTernary2Bit><<<num_ctas, kThreads, 0, stream>>>(
        pushes, num_pushes, chunks, first_cta, num_chunks, sums, errors);
  } else if (layout == Layout::kTernaryBase3) {
    SumTernaryKernel<Layout::kTernaryBase3><<<num_ctas, kThreads, 0, stream>>>(
        pushes, num_pushes, chunks, first_cta, num_chunks, sums, errors);
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t LaunchDecodeSums(const uint8_t* packed, const SumChunk* chunks,
                             const uint32_t* first_cta, uint32_t num_chunks,
                             uint32_t num_ctas, uint32_t num_summands,
                             Layout layout, float* out, uint32_t* errors,
                             cudaStream_t stream) {
  if (num_summands < 1 || num_summands > kMaxSummands) {
    return cudaErrorInvalidValue;
  }
  if (num_ctas == 0) return cudaSuccess;
  if (layout == Layout::kSumRadix) {
    const tile::RadixParams radix = tile::MakeRadixParams(num_summands);
    if (radix.digits > tile::kMaxRadixDigits) return cudaErrorInvalidValue;
    DecodeSumRadixKernel<<<num_ctas, kRadixThreads, 0, stream>>>(
        packed, chunks, first_cta, num_chunks, num_summands, radix, out,
        errors);
    return cudaGetLastError();
  }
  if (layout != Layout::kSumBits) return cudaErrorInvalidValue;
  // N in [1, kMaxSummands] (checked above): a width the dispatch covers.
  DispatchSumBits(SumFieldBits(num_summands), [&](auto width) {
    LaunchSumBits<decltype(width)::value>(packed, chunks, first_cta,
                                          num_chunks, num_ctas, num_summands,
                                          out, errors, stream);
  });
  return cudaGetLastError();
}

}  // namespace tern::kernels::cuda
