// The server-side reduction for codecs whose pushes cannot be added in
// their encoded form (fp32, fp16): decode each push, add in fp32, average,
// re-encode (the BytePS-style path; DESIGN section 6).
#ifndef TERN_KERNELS_FLOAT_AGGREGATION_H_
#define TERN_KERNELS_FLOAT_AGGREGATION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/codec.h"
#include "kernels/decoded_values.h"
#include "kernels/payload.h"

namespace tern::kernels {

// Adds the decoded pushes in worker order, whatever order they arrive in,
// so the float sums (and the pull bytes) are the same in every run. A push
// that arrives before an earlier worker's waits, decoded, until it can be
// added; in the common in-order case nothing waits.
class FloatAggregation final : public Aggregation {
 public:
  // Validates a push and decodes it into the span (of num_elements values).
  using DecodePush =
      std::function<absl::Status(const Payload& push, absl::Span<float> out)>;
  // The pull payload for the element-wise average of the pushes.
  using EncodePull = std::function<absl::StatusOr<Payload>(
      absl::Span<const float> average, uint32_t num_workers)>;

  FloatAggregation(uint64_t num_elements, uint32_t num_workers,
                   DecodePush decode_push, EncodePull encode_pull);

  absl::Status Add(uint32_t worker, const Payload& push) override;
  // Adds worker `worker`'s push as values the caller already decoded and
  // validated (num_elements finite values), so a shard that decoded a push
  // to check it never decodes it again (core/payload_validation.h). The
  // same rules as Add otherwise; the result is the same as Add's.
  absl::Status AddDecoded(uint32_t worker, DecodedValues values);
  absl::StatusOr<Payload> Finish() override;

 private:
  // Adds the next worker's values to sum_ (worker 0's become it).
  void AddInOrder(absl::Span<const float> values);
  void AddInOrder(DecodedValues&& values);

  const uint64_t num_elements_;
  const uint32_t num_workers_;
  const DecodePush decode_push_;
  const EncodePull encode_pull_;

  std::vector<bool> added_;  // per worker: push accepted
  uint32_t num_added_ = 0;
  uint32_t next_ = 0;  // workers [0, next_) are in sum_
  DecodedValues sum_;
  std::vector<DecodedValues> waiting_;  // per worker, decoded
  DecodedValues scratch_;
  bool finished_ = false;  // Finish moved the pull out
};

// The aggregation of a codec whose pull is the average written in the
// push's own layout (fp32, fp16, int8): a push must stand for one summand
// (CheckIsPush) and is decoded with `decode`; the average is written with
// `write` (which may return a plain Payload) as a payload of N summands.
std::unique_ptr<Aggregation> NewDenseAggregation(
    uint64_t num_elements, uint32_t num_workers,
    FloatAggregation::DecodePush decode, FloatAggregation::EncodePull write);

// The aggregation of a codec that is not Summable() (DESIGN section 6):
// decode each push with `codec`, average in fp32 in worker order, and
// re-encode the average with `codec` for the pull, keyed by
// context.stream and in groups of context.group_size. For a codec that
// UsesErrorFeedback(), the shard's residual (context.residual, or one
// owned by the aggregation when that is null) is added before the encode
// and keeps what the pull did not carry. The pull's num_summands is N; its
// Decode gives the average. `codec` must outlive the aggregation.
std::unique_ptr<Aggregation> NewReencodingAggregation(
    const Codec& codec, uint64_t num_elements, uint32_t num_workers,
    const AggregationContext& context);

}  // namespace tern::kernels

#endif  // TERN_KERNELS_FLOAT_AGGREGATION_H_
