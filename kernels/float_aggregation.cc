#include "kernels/float_aggregation.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "kernels/payload_checks.h"

namespace tern::kernels {
namespace {

// Calls op(i) for i in [0, n): in blocks of a fixed width, then the rest one
// by one. GCC's -O2 vectorizes only loops that need no scalar remainder (its
// "very cheap" cost model), so a loop over n does not become SIMD while a
// block of 16 does; per element the arithmetic is the same, and so are the
// bits.
template <typename Op>
void ForEachBlocked(size_t n, Op&& op) {
  constexpr size_t kBlock = 16;
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    for (size_t j = 0; j < kBlock; ++j) op(i + j);
  }
  for (; i < n; ++i) op(i);
}

// Encodes average + residual; the residual keeps what the payload does not
// carry (error feedback on the shard's side, DESIGN section 6). An empty
// residual starts at 0.
absl::StatusOr<Payload> EncodeWithResidual(const Codec& codec,
                                           absl::Span<const float> average,
                                           const EncodeContext& encode,
                                           std::vector<float>& residual) {
  if (residual.empty()) residual.assign(average.size(), 0.0f);
  if (residual.size() != average.size()) {
    return absl::FailedPreconditionError(
        absl::StrFormat("the shard's residual has %d values, the chunk %d",
                        residual.size(), average.size()));
  }
  std::vector<float> target(average.begin(), average.end());
  for (size_t i = 0; i < target.size(); ++i) target[i] += residual[i];
  absl::StatusOr<Payload> pull = codec.Encode(target, encode);
  if (!pull.ok()) return pull.status();
  DecodedValues carried(target.size());
  absl::Status status = codec.Decode(*pull, absl::MakeSpan(carried));
  if (!status.ok()) return status;
  for (size_t i = 0; i < target.size(); ++i) {
    residual[i] = target[i] - carried[i];
  }
  return pull;
}

}  // namespace

FloatAggregation::FloatAggregation(uint64_t num_elements, uint32_t num_workers,
                                   DecodePush decode_push,
                                   EncodePull encode_pull)
    : num_elements_(num_elements),
      num_workers_(num_workers),
      decode_push_(std::move(decode_push)),
      encode_pull_(std::move(encode_pull)),
      added_(num_workers, false),
      waiting_(num_workers) {}

absl::Status FloatAggregation::Add(uint32_t worker, const Payload& push) {
  if (worker >= num_workers_) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "worker %d is out of range: %d workers", worker, num_workers_));
  }
  if (added_[worker]) {
    return absl::AlreadyExistsError(
        absl::StrFormat("worker %d already pushed", worker));
  }
  DecodedValues& target = worker == next_ ? scratch_ : waiting_[worker];
  target.resize(num_elements_);
  absl::Status status = decode_push_(push, absl::MakeSpan(target));
  if (!status.ok()) {
    if (worker != next_) DecodedValues().swap(target);
    return status;
  }
  added_[worker] = true;
  ++num_added_;
  if (worker != next_) return absl::OkStatus();
  AddInOrder(scratch_);
  while (next_ < num_workers_ && added_[next_]) {
    DecodedValues values = std::move(waiting_[next_]);
    AddInOrder(values);
  }
  return absl::OkStatus();
}

absl::Status FloatAggregation::AddDecoded(uint32_t worker,
                                          DecodedValues values) {
  if (worker >= num_workers_) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "worker %d is out of range: %d workers", worker, num_workers_));
  }
  if (added_[worker]) {
    return absl::AlreadyExistsError(
        absl::StrFormat("worker %d already pushed", worker));
  }
  if (values.size() != num_elements_) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d decoded values, want %d", values.size(), num_elements_));
  }
  added_[worker] = true;
  ++num_added_;
  if (worker != next_) {
    waiting_[worker] = std::move(values);
    return absl::OkStatus();
  }
  AddInOrder(std::move(values));
  while (next_ < num_workers_ && added_[next_]) {
    AddInOrder(std::move(waiting_[next_]));
  }
  return absl::OkStatus();
}

void FloatAggregation::AddInOrder(DecodedValues&& values) {
  if (next_ != 0) return AddInOrder(absl::MakeConstSpan(values));
  // The first worker's values become the sum: no copy.
  sum_ = std::move(values);
  ++next_;
}

void FloatAggregation::AddInOrder(absl::Span<const float> values) {
  if (next_ == 0) {
    sum_.assign(values.begin(), values.end());
  } else {
    ForEachBlocked(sum_.size(), [&](size_t i) { sum_[i] += values[i]; });
  }
  ++next_;
}

absl::StatusOr<Payload> FloatAggregation::Finish() {
  if (finished_) return AlreadyFinished();
  if (num_workers_ == 0 || num_added_ < num_workers_) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%d of %d pushes added", num_added_, num_workers_));
  }
  // x / 1 is x: one worker's sum is its average without a pass over it.
  if (num_workers_ > 1) {
    const float count = static_cast<float>(num_workers_);
    ForEachBlocked(sum_.size(), [&](size_t i) { sum_[i] /= count; });
  }
  absl::StatusOr<Payload> pull = encode_pull_(sum_, num_workers_);
  DecodedValues().swap(sum_);
  DecodedValues().swap(scratch_);
  finished_ = true;
  return pull;
}

std::unique_ptr<Aggregation> NewDenseAggregation(
    uint64_t num_elements, uint32_t num_workers,
    FloatAggregation::DecodePush decode, FloatAggregation::EncodePull write) {
  return std::make_unique<FloatAggregation>(
      num_elements, num_workers,
      [decode = std::move(decode)](const Payload& push, absl::Span<float> out) {
        absl::Status status = CheckIsPush(push);
        return status.ok() ? decode(push, out) : status;
      },
      std::move(write));
}

std::unique_ptr<Aggregation> NewReencodingAggregation(
    const Codec& codec, uint64_t num_elements, uint32_t num_workers,
    const AggregationContext& context) {
  auto decode_push = [&codec](const Payload& push, absl::Span<float> out) {
    absl::Status status = CheckIsPush(push);
    return status.ok() ? codec.Decode(push, out) : status;
  };
  // The residual lives in the shard (context.residual) or, without one, in
  // this lambda, which the aggregation owns.
  auto owned_residual = std::make_shared<std::vector<float>>();
  auto encode_pull = [&codec, context, owned_residual](
                         absl::Span<const float> average,
                         uint32_t num_summands) -> absl::StatusOr<Payload> {
    EncodeContext encode;
    encode.stream = context.stream;
    encode.group_size = context.group_size;
    // Without error feedback (fp32, fp16, qsgd) the average is encoded as it
    // is, without a copy.
    absl::StatusOr<Payload> pull =
        codec.UsesErrorFeedback()
            ? EncodeWithResidual(codec, average, encode,
                                 context.residual != nullptr ? *context.residual
                                                             : *owned_residual)
            : codec.Encode(average, encode);
    if (!pull.ok()) return pull.status();
    pull->num_summands = num_summands;
    return pull;
  };
  return std::make_unique<FloatAggregation>(num_elements, num_workers,
                                            std::move(decode_push),
                                            std::move(encode_pull));
}

}  // namespace tern::kernels
