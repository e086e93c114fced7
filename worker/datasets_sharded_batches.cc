// Each worker's deterministic shard of every epoch (ShardedBatches).
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/philox.h"
#include "common/status_macros.h"
#include "worker/datasets.h"
#include "worker/datasets_internal.h"

namespace tern::worker {

using datasets_internal::DomainKey;
using datasets_internal::kShuffleDomain;

absl::Status ShardedBatches::Validate(const Dataset& data, uint32_t worker,
                                      uint32_t num_workers,
                                      uint32_t batch_size) {
  if (num_workers == 0 || worker >= num_workers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker ", worker, " of ", num_workers, ": need worker < num_workers"));
  }
  if (batch_size == 0) {
    return absl::InvalidArgumentError("batch size must be positive");
  }
  if (!data.images.defined() || !data.labels.defined() ||
      data.images.dim() != 4 || data.labels.dim() < 1 ||
      (data.labels.dim() != 1 && data.labels.scalar_type() == torch::kInt64) ||
      data.images.size(0) != data.labels.size(0)) {
    return absl::InvalidArgumentError(
        "data set needs images [N,C,H,W] and labels [N] (or float targets "
        "[N, ...]) of the same N");
  }
  const uint64_t n = static_cast<uint64_t>(data.images.size(0));
  const uint64_t per_step = uint64_t{num_workers} * batch_size;
  if (n < per_step) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the data set has ", n, " training examples, fewer than ", num_workers,
        " workers x batch size ", batch_size, " = ", per_step));
  }
  return absl::OkStatus();
}

absl::StatusOr<ShardedBatches> ShardedBatches::Create(const Dataset& data,
                                                      uint32_t worker,
                                                      uint32_t num_workers,
                                                      uint32_t batch_size,
                                                      uint64_t seed) {
  TERN_RETURN_IF_ERROR(Validate(data, worker, num_workers, batch_size));
  return ShardedBatches(data, worker, num_workers, batch_size, seed);
}

ShardedBatches::ShardedBatches(const Dataset& data, uint32_t worker,
                               uint32_t num_workers, uint32_t batch_size,
                               uint64_t seed)
    : data_(data),
      worker_(worker),
      num_workers_(num_workers),
      batch_size_(batch_size),
      seed_(seed) {
  const absl::Status valid = Validate(data, worker, num_workers, batch_size);
  TORCH_CHECK(valid.ok(), "ShardedBatches: ", valid.ToString());
  batches_per_epoch_ = static_cast<uint64_t>(data.images.size(0)) /
                       (uint64_t{num_workers} * batch_size);
}

uint64_t ShardedBatches::epoch() const {
  return position_ / batches_per_epoch_;
}

uint64_t ShardedBatches::batches_per_epoch() const {
  return batches_per_epoch_;
}

void ShardedBatches::Seek(uint64_t position) { position_ = position; }

void ShardedBatches::Shuffle(uint64_t epoch) {
  const int64_t n = data_.images.size(0);
  permutation_.resize(n);
  std::iota(permutation_.begin(), permutation_.end(), int64_t{0});
  const PhiloxKey key = DomainKey(seed_, kShuffleDomain);
  // Fisher-Yates: draw d (d = 0, 1, ...) picks j uniformly in [0, i] for
  // i = n-1-d from the 64-bit value of two Philox words; the multiply-shift
  // map's bias is below n / 2^64.
  PhiloxCounter words{};
  for (int64_t i = n - 1; i > 0; --i) {
    const uint64_t draw = static_cast<uint64_t>(n - 1 - i);
    if (draw % 2 == 0) {
      const uint64_t group = draw / 2;
      words = Philox4x32_10(PhiloxCounter{{static_cast<uint32_t>(group),
                                           static_cast<uint32_t>(group >> 32),
                                           static_cast<uint32_t>(epoch),
                                           static_cast<uint32_t>(epoch >> 32)}},
                            key);
    }
    const int half = static_cast<int>(draw % 2) * 2;
    const uint64_t r =
        (uint64_t{words.v[half]} << 32) | uint64_t{words.v[half + 1]};
    const int64_t j = static_cast<int64_t>(
        (static_cast<unsigned __int128>(r) * static_cast<uint64_t>(i + 1)) >>
        64);
    std::swap(permutation_[i], permutation_[j]);
  }
  permutation_epoch_ = epoch;
}

std::pair<torch::Tensor, torch::Tensor> ShardedBatches::Next() {
  const uint64_t epoch = position_ / batches_per_epoch_;
  const uint64_t batch = position_ % batches_per_epoch_;
  if (epoch != permutation_epoch_) Shuffle(epoch);
  torch::Tensor index = torch::empty({batch_size_}, torch::kInt64);
  int64_t* idx = index.data_ptr<int64_t>();
  for (uint32_t j = 0; j < batch_size_; ++j) {
    const uint64_t pos = (batch * batch_size_ + j) * num_workers_ + worker_;
    idx[j] = permutation_[pos];
  }
  ++position_;
  return {data_.images.index_select(0, index),
          data_.labels.index_select(0, index)};
}

}  // namespace tern::worker
