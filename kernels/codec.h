// The codec interface (DESIGN section 6): how a chunk of floats becomes a
// payload on the wire and back. Kernels work on raw spans; nothing here
// knows about protobuf, gRPC or libtorch.
//
// Thread safety: a Codec is immutable after construction; all its methods
// are const and may be called from many threads at once. An Aggregation is
// not thread-safe: the caller serializes Add and Finish for one chunk.
#ifndef TERN_KERNELS_CODEC_H_
#define TERN_KERNELS_CODEC_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/philox.h"
#include "kernels/payload.h"

namespace tern::kernels {

// Per-call inputs of an encode.
struct EncodeContext {
  // Keys the counter-based randomness: (seed, step, chunk key, worker id)
  // plus the element index inside the chunk.
  RandomStream stream;
  // The scaler to quantize with. For TernGrad this is the shared scaler
  // s_k = max_i s_ik; a value <= 0 means "use my own local scaler".
  float scaler = 0.0f;
};

// The server-side reduction of the N pushes of one chunk in one step.
//
// The result depends only on the set of pushes, never on their arrival
// order: integer sums are exact, and float codecs add the pushes in worker
// order. That keeps a step's pull bytes reproducible across runs and
// retries (DESIGN sections 2 and 7).
class Aggregation {
 public:
  virtual ~Aggregation() = default;
  // Adds the push of worker `worker` (in [0, num_workers)). Validates the
  // payload first: on error nothing is added and the aggregation stays
  // usable. A second push from the same worker is ALREADY_EXISTS and changes
  // nothing (the server answers retries from its own record).
  virtual absl::Status Add(uint32_t worker, const Payload& push) = 0;
  // The payload every worker pulls, once all num_workers pushes were added
  // (FAILED_PRECONDITION before). Calling it again returns the same payload.
  virtual absl::StatusOr<Payload> Finish() = 0;
};

class Codec {
 public:
  virtual ~Codec() = default;

  virtual CodecId id() const = 0;
  virtual std::string name() const = 0;

  // True when the server may combine encoded values directly (TernGrad with
  // a shared scaler sums integer codes); false when it must decode, sum in
  // fp32 and re-encode.
  virtual bool Summable() const = 0;

  // Encodes one chunk.
  virtual absl::StatusOr<Payload> Encode(absl::Span<const float> values,
                                         const EncodeContext& context) const = 0;

  // Writes the values a push or a pull payload stands for into `out`
  // (overwriting it); a pull decodes to the average over the summands.
  // Returns INVALID_ARGUMENT, naming the problem, on any payload that does
  // not match this codec or `out.size()`; never reads past its buffer.
  virtual absl::Status Decode(const Payload& payload,
                              absl::Span<float> out) const = 0;

  // A fresh aggregation of `num_workers` pushes of `num_elements` values.
  virtual std::unique_ptr<Aggregation> NewAggregation(
      uint64_t num_elements, uint32_t num_workers) const = 0;
};

}  // namespace tern::kernels

#endif  // TERN_KERNELS_CODEC_H_
