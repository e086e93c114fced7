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
#include <limits>
#include <memory>
#include <string>
#include <utility>
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
  // TernGrad with ClipRule::kWorker: this worker's own clip bound s_ik of
  // the chunk (LocalScaler), which the caller computed already for the
  // scaler exchange. NaN means "not given": the codec computes it from the
  // values.
  float clip_bound = std::numeric_limits<float>::quiet_NaN();
  // A threshold chosen outside the chunk: the dropping codec's global
  // threshold over the whole gradient (DropScope::kGlobal). A value <= 0
  // means "select my own from this chunk".
  float threshold = 0.0f;
  // Length of the groups ("columns") that get their own reconstruction
  // values (onebit, adaptive): consecutive runs from the chunk's start.
  // 0 means one group for the whole chunk. See ColumnGroupSize().
  uint64_t group_size = 0;
};

// The `worker` of the RandomStream a shard encodes its pulls with: no worker
// has this id, so the shard's draws never repeat a worker's.
inline constexpr uint32_t kShardStreamWorker = 0xFFFFFFFFu;

// The group ("column") length the codecs with column-wise reconstruction
// use for a tensor of this shape, the same on workers and shards: the
// length of a row of the row-major tensor (numel / shape[0]) for rank >= 2,
// the whole chunk (0) for scalars and vectors. (The papers' matrices are
// column-major, so their columns are the contiguous runs; tern's contiguous
// runs are rows.)
inline uint64_t ColumnGroupSize(absl::Span<const int64_t> shape) {
  if (shape.size() < 2 || shape[0] <= 0) return 0;
  uint64_t row = 1;
  for (size_t i = 1; i < shape.size(); ++i) {
    row *= static_cast<uint64_t>(shape[i] > 0 ? shape[i] : 0);
  }
  return row;
}

// What a shard gives a new aggregation besides the sizes: how to encode the
// pull when the codec re-encodes (non-summable codecs).
struct AggregationContext {
  // Randomness of the pull encoding: (seed, step, chunk,
  // kShardStreamWorker).
  RandomStream stream;
  // The groups the pull is encoded with (as EncodeContext::group_size).
  uint64_t group_size = 0;
  // The shard's own error-feedback residual for this chunk, kept across
  // steps by the shard (Aji & Heafield send pulls as deltas with a residual
  // on the server). Used only by codecs with UsesErrorFeedback(); then it is
  // non-null and has num_elements values. Finish() adds it to the average
  // before encoding and leaves in it what the pull did not carry.
  std::vector<float>* residual = nullptr;
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
  // (FAILED_PRECONDITION before). It moves out: a second call is
  // FAILED_PRECONDITION, so that the pull is never copied (the shard answers
  // every worker from the one it takes).
  virtual absl::StatusOr<Payload> Finish() = 0;

 protected:
  // What a second Finish answers.
  static absl::Status AlreadyFinished() {
    return absl::FailedPreconditionError(
        "the pull was already taken: Finish moves it out once");
  }
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

  // True for codecs that must be wrapped in error feedback (ErrorFeedback on
  // workers, AggregationContext::residual on shards): what one encode drops
  // is carried into the next instead of being lost.
  virtual bool UsesErrorFeedback() const { return false; }

  // Encodes one chunk.
  virtual absl::StatusOr<Payload> Encode(absl::Span<const float> values,
                                         const EncodeContext& context) const = 0;

  // Encodes one chunk into `out` (overwriting every field), with the bytes
  // Encode() gives. A codec may reuse out's buffers: a caller that keeps
  // one Payload per chunk from step to step (handing the previous step's
  // back once it is sent) then touches no fresh pages. Encode() allocates a
  // new buffer per call, which for a chunk above the allocator's mmap
  // threshold (32 MiB in glibc) means page faults and zeroing in the
  // kernel on every step. The default calls Encode(); on error `out` is
  // unspecified.
  virtual absl::Status EncodeInto(absl::Span<const float> values,
                                  const EncodeContext& context,
                                  Payload* out) const {
    absl::StatusOr<Payload> payload = Encode(values, context);
    if (!payload.ok()) return payload.status();
    *out = *std::move(payload);
    return absl::OkStatus();
  }

  // Writes the values a push or a pull payload stands for into `out`
  // (overwriting it); a pull decodes to the average over the summands.
  // Returns INVALID_ARGUMENT, naming the problem, on any payload that does
  // not match this codec or `out.size()`; never reads past its buffer.
  virtual absl::Status Decode(const Payload& payload,
                              absl::Span<float> out) const = 0;

  // A fresh aggregation of `num_workers` pushes of `num_elements` values.
  virtual std::unique_ptr<Aggregation> NewAggregation(
      uint64_t num_elements, uint32_t num_workers,
      const AggregationContext& context) const = 0;

  // The same without a context: for summable codecs, and for tests of the
  // others (then the pull draws from stream (0, 0, 0, kShardStreamWorker)
  // with one group and no residual; a codec with error feedback keeps a
  // residual inside the aggregation that ends with it).
  std::unique_ptr<Aggregation> NewAggregation(uint64_t num_elements,
                                              uint32_t num_workers) const {
    AggregationContext context;
    context.stream.worker = kShardStreamWorker;
    return NewAggregation(num_elements, num_workers, context);
  }
};

}  // namespace tern::kernels

#endif  // TERN_KERNELS_CODEC_H_
