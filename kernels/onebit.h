// 1-bit quantization kernels over raw spans (Seide et al., "1-Bit
// Stochastic Gradient Descent and its Application to Data-Parallel
// Distributed Training of Speech DNNs", Interspeech 2014, as Dryden et al.,
// MLHPC 2016, Sec. 3.1 describe it): every element becomes one sign bit,
// and each group ("column") of consecutive elements gets two reconstruction
// values, the mean of its non-negative and the mean of its negative
// elements. Dryden et al. also estimate the two means from a random sample
// of each column; GroupMeans() does that when given a sample size.
//
// The byte layout is LAYOUT_SIGN_BITS of proto/tern/v1/payload.proto; these
// functions handle its bit part and its scalers, the codec
// (onebit_codec.h) the uint32 group_size header.
//
// All functions are pure and thread-compatible. Functions returning
// absl::Status validate what came from the network or the user and never
// read past a span; functions returning void have size preconditions that
// abort on our own bugs.
#ifndef TERN_KERNELS_ONEBIT_H_
#define TERN_KERNELS_ONEBIT_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/philox.h"

namespace tern::kernels {

// The largest chunk: the sampled means' draws are numbered below the
// element count, four per Philox counter value (a uint32).
inline constexpr uint64_t kMaxOneBitElements = uint64_t{4} << 32;

// The group length a chunk of `num_elements` is encoded with when
// `requested` (EncodeContext::group_size) is asked for: `requested` when it
// splits the chunk, else the whole chunk (0 asks for that explicitly), and
// at least 1, the smallest group_size the layout allows, for an empty
// chunk. Every chunk thus has one canonical header.
uint64_t OneBitGroupSize(uint64_t num_elements, uint64_t requested);

// ceil(num_elements / group_size); group_size >= 1.
uint64_t OneBitNumGroups(uint64_t num_elements, uint64_t group_size);

// Bytes of the sign bits of `num_elements` values: ceil(num_elements / 8).
size_t SignBitsBytes(uint64_t num_elements);

// OK when every value is finite, else INVALID_ARGUMENT naming the first
// element that is not.
absl::Status CheckFiniteValues(absl::Span<const float> values);

// The two reconstruction values of every group of `group_size` (>= 1)
// consecutive elements: means[2g] = the mean of group g's non-negative
// elements, means[2g + 1] = the mean of its negative ones, 0 for a sign the
// group (or its sample) lacks. Requires means.size() == 2 *
// OneBitNumGroups(values.size(), group_size) and finite values.
//
// sample_size == 0, or a group of at most sample_size elements: the exact
// means. Otherwise the means of sample_size draws with replacement from the
// group (Dryden et al. 2016, Sec. 3.1). Draw j of group g takes word
// (g * sample_size + j) % 4 of RandomWords(stream, (g * sample_size + j) /
// 4): the groups' draws are numbered one after another, so no two draws of
// a chunk share a word (a sampled group is longer than sample_size, so every
// number stays below the element count). A word w picks element
// (w * length) >> 32 of a group of `length` elements (the multiply-shift
// map; it favors some elements over others by at most length / 2^32).
//
// Reproducible bit for bit on every device, in any summation order: the
// summands are added as fixed-point integers with one shift per group,
// chosen from the group's (or sample's) largest magnitude and summand
// count (onebit_math.h), and each mean is float(double(sum) * 2^-shift /
// count). The CUDA twin (onebit_cuda.h) gives the same bits.
void GroupMeans(absl::Span<const float> values, uint64_t group_size,
                uint32_t sample_size, const RandomStream& stream,
                absl::Span<float> means);

// Bit i of `out` (bit i % 8 of byte i / 8) = values[i] >= 0 (so +0, -0 and
// every non-negative value give 1); padding bits are zero. Requires
// out.size() == SignBitsBytes(values.size()).
void PackSignBits(absl::Span<const float> values, absl::Span<uint8_t> out);

// out[i] = means[2g] when bit i is set, else means[2g + 1], g = i /
// group_size. Validates the length of `bits` (exactly SignBitsBytes(
// out.size())), the zero padding, group_size >= 1 and the count of `means`
// (2 per group), and nothing about the means' values (the codec checks
// those). On error `out` is unspecified.
absl::Status DecodeSignBits(absl::Span<const uint8_t> bits, uint64_t group_size,
                            absl::Span<const float> means,
                            absl::Span<float> out);

}  // namespace tern::kernels

#endif  // TERN_KERNELS_ONEBIT_H_
