// LAYOUT_SUM_HUFFMAN: a TernGrad pull (sums of N ternary codes, values in
// [-N, N]) entropy-coded with a static canonical Huffman code built for each
// chunk. Most sums are near 0, so this takes fewer bits than SUM_BITS'
// ceil(log2(2N+1)) or SUM_RADIX's log2(2N+1): within a few percent of the
// chunk's order-0 entropy (kernels/README.md has the measurements).
//
// Bytes of a chunk of n sums (proto/tern/v1/payload.proto is normative):
//   - the code lengths, 4 bits per symbol (symbol s in the low nibble of
//     byte s/2 when s is even, the high one when odd; a missing high nibble
//     is zero). Symbol s <= 2E stands for the sum s - E, with
//     E = min(N, kHuffmanDirectLimit); when N > E one more symbol, the
//     escape, stands for the sums beyond +-E.
//   - one little-endian bit stream: per element its code (canonical, first
//     code bit first), an escape followed by (sum + N) in ceil(log2(2N+1))
//     bits. Padding bits are zero.
// Lengths are 0 (symbol absent) to kHuffmanMaxCodeBits, and form a complete
// prefix code, with two exceptions: n = 0 has every length 0, and a chunk of
// one symbol gives that symbol length 1 and its code zero bits.
#ifndef TERN_KERNELS_SUM_HUFFMAN_H_
#define TERN_KERNELS_SUM_HUFFMAN_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace tern::kernels {

// The longest code: the decoder's table then has 2^12 entries (8 KiB, in L1).
inline constexpr uint32_t kHuffmanMaxCodeBits = 12;

// Sums within +-63 have a symbol of their own, so the alphabet (and the
// header) stays at most 128 symbols (64 bytes) for any N.
inline constexpr uint32_t kHuffmanDirectLimit = 63;

// The chunk's bytes in LAYOUT_SUM_HUFFMAN. Requires 1 <= N <= kMaxSummands
// and every sum in [-N, N] (the server only adds validated codes).
std::string PackSumsHuffman(absl::Span<const int32_t> sums,
                            uint32_t num_summands);

// The sums of a packed chunk of `sums.size()` elements. Validates the
// header, every code and escaped field, the length and the padding; on
// error `sums` is unspecified.
absl::Status UnpackSumsHuffman(absl::Span<const uint8_t> packed,
                               uint32_t num_summands, absl::Span<int32_t> sums);

// out[i] = DecodeValue(sum[i], factor), validated like UnpackSumsHuffman.
absl::Status DecodeSumsHuffman(absl::Span<const uint8_t> packed,
                               uint32_t num_summands, float factor,
                               absl::Span<float> out);

}  // namespace tern::kernels

#endif  // TERN_KERNELS_SUM_HUFFMAN_H_
