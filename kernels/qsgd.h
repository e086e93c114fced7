// QSGD kernels over raw spans (Alistarh et al., "QSGD:
// Communication-Efficient SGD via Gradient Quantization and Encoding", NIPS
// 2017, Sec. 3.1): a chunk is cut into buckets of consecutive elements;
// each element v of a bucket with L2 norm ||v|| becomes a signed level
//
//   l = sign(v) * xi,  xi = floor(s |v| / ||v|| + u),  u ~ U[0, 1),
//
// so that E[xi] = s |v| / ||v|| and the value ||v|| * l / s is an unbiased
// estimate of v with an error below ||v|| / s. (The paper's Elias coding of
// the levels is left out: levels travel as fixed-width fields.)
//
// The byte layout is LAYOUT_QSGD_LEVELS of proto/tern/v1/payload.proto;
// these functions handle its level fields and its scalers (the bucket
// norms), the codec (qsgd_codec.h) the uint32 bucket_size and levels
// header.
//
// All functions are pure and thread-compatible. Functions returning
// absl::Status validate what came from the network or the user and never
// read past a span; functions returning void have size preconditions that
// abort on our own bugs.
#ifndef TERN_KERNELS_QSGD_H_
#define TERN_KERNELS_QSGD_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/philox.h"

namespace tern::kernels {

// The most levels s per sign: fields (l + s) of at most 16 bits. (The paper
// goes up to s = 2^8 for its 8-bit variant.)
inline constexpr uint32_t kMaxQsgdLevels = 32767;

// Element i draws word i % 4 of RandomWords(stream, i / 4), and that group
// index is a uint32, as in TernGrad.
inline constexpr uint64_t kMaxQsgdElements = uint64_t{4} << 32;

// Bits of one field: ceil(log2(2s + 1)); 0 for s outside [1,
// kMaxQsgdLevels].
uint32_t QsgdFieldBits(uint32_t levels);

// ceil(num_elements / bucket_size); bucket_size >= 1.
uint64_t QsgdNumBuckets(uint64_t num_elements, uint64_t bucket_size);

// Bytes of the level fields of `num_elements` values:
// ceil(num_elements * QsgdFieldBits(levels) / 8).
size_t QsgdPackedBytes(uint64_t num_elements, uint32_t levels);

// The signed level of one element (above) with u = UniformFloat(word), in
// [-levels, levels]. Float arithmetic in a fixed order, each operation
// rounded on its own: r = |v| / norm, x = r * s, xi = floor(x) plus 1 when
// u < x - floor(x) (that difference is exact), and xi = s when x >= s (a
// float norm can round below the largest |v|). A bucket norm <= 0 gives 0.
// Requires a finite v and levels >= 1.
int32_t QsgdLevel(float value, float norm, uint32_t levels, uint32_t word);

// The L2 norm of every bucket of `bucket_size` (>= 1) consecutive elements,
// into norms (norms.size() == QsgdNumBuckets(values.size(), bucket_size)).
// The squares are summed in double in a fixed order (element k of a bucket
// in lane k % 4, lanes added lane 0 first), and the square root is rounded
// to float. INVALID_ARGUMENT naming the element for a non-finite value, and
// naming the bucket for a norm above the float range.
absl::Status BucketNorms(absl::Span<const float> values, uint64_t bucket_size,
                         absl::Span<float> norms);

// Packs the fields (QsgdLevel(values[i], norms[i / bucket_size], levels,
// word i of `stream`) + levels) as one little-endian bit stream of
// QsgdFieldBits(levels) bits per element, padding bits zero. Requires
// finite values, norms from BucketNorms, levels in [1, kMaxQsgdLevels],
// at most kMaxQsgdElements values and out.size() ==
// QsgdPackedBytes(values.size(), levels).
void QuantizePackQsgd(absl::Span<const float> values, uint64_t bucket_size,
                      absl::Span<const float> norms, uint32_t levels,
                      const RandomStream& stream, absl::Span<uint8_t> out);

// out[i] = norm_b * l_i / s for the fields of `packed`, computed as
// float(double(norm_b) / s * l_i), b = i / bucket_size. Validates
// bucket_size >= 1, levels in [1, kMaxQsgdLevels], the count of norms and
// their values (finite, >= 0), the exact length of `packed`, every field
// (<= 2s) and the zero padding. On error `out` is unspecified.
absl::Status DecodeQsgd(absl::Span<const uint8_t> packed, uint64_t bucket_size,
                        uint32_t levels, absl::Span<const float> norms,
                        absl::Span<float> out);

}  // namespace tern::kernels

#endif  // TERN_KERNELS_QSGD_H_
