// The run one shard serves, as the first successful join fixes it: the
// config, the ParamSpec, and the shard's chunks with their codecs and
// aggregations (DESIGN section 3). Built once by ShardRun::Build and never
// reshaped after, so a ShardChunk's address stays valid while the run lives
// and everything in it but a chunk's aggregation and residual is read
// without a lock.
#ifndef TERN_SERVER_SHARD_RUN_H_
#define TERN_SERVER_SHARD_RUN_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "kernels/codec.h"
#include "kernels/codec_options.h"
#include "server/messages.h"

namespace tern::server {

// One chunk the shard owns.
struct ShardChunk {
  uint32_t key = 0;
  uint64_t num_elements = 0;
  const kernels::Codec* codec = nullptr;  // owned by the ShardRun
  // The layout pushes must have; kUnspecified leaves it to the codec.
  kernels::Layout push_layout = kernels::Layout::kUnspecified;
  // TernGrad chunks take part in scaler sharing, at `scaler_slot` of the
  // shard's scaler list.
  bool shares_scaler = false;
  size_t scaler_slot = 0;
  // The groups ("columns") a re-encoded pull uses: ColumnGroupSize of the
  // shape of the tensor the chunk belongs to, as on the workers.
  uint64_t group_size = 0;

  // Serializes the workers adding to this chunk.
  absl::Mutex mu;
  // The sum of the open step's pushes of this chunk.
  std::unique_ptr<kernels::Aggregation> aggregation ABSL_GUARDED_BY(mu);
  // The shard's error-feedback residual (codecs with UsesErrorFeedback()):
  // what the pulls so far did not carry. Zeros at the start; only Finish()
  // of a step's aggregation changes it, and the shard calls that once per
  // step, so retries and duplicates never touch it.
  std::vector<float> residual ABSL_GUARDED_BY(mu);

  // Opens the aggregation of `step`: its pull is encoded with the stream
  // (seed, step, key, kShardStreamWorker), in groups of group_size, and
  // with the residual where the codec uses one.
  void Open(uint64_t seed, uint64_t step, uint32_t num_workers)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
};

// What the shard was started with that a run must fit.
struct ShardLimits {
  uint32_t shard_index = 0;
  uint32_t num_shards = 1;
  uint32_t num_workers = 1;
  uint64_t max_message_bytes = 0;
  std::function<absl::StatusOr<std::unique_ptr<kernels::Codec>>(
      const kernels::CodecOptions&)>
      make_codec;
  // The run this shard serves (--run_id); empty: any.
  std::string run_id;
};

struct ShardRun {
  // Builds the run from the first joiner's request (already checked by
  // CheckJoinOptions): INVALID_ARGUMENT for a ParamSpec or config that
  // cannot be partitioned or coded, FAILED_PRECONDITION for a model that
  // the run's shards together could not carry (core::CheckModelFits,
  // counted before anything is made for the model) or whose share on this
  // shard would not fit a message in fp32. Every chunk's aggregation is
  // opened for step 0.
  static absl::StatusOr<std::unique_ptr<ShardRun>> Build(
      const JoinRequest& first, const ShardLimits& limits);

  // The chunk of `key`, or null when this shard does not own it.
  ShardChunk* Find(uint32_t key) const;

  uint32_t first_worker = 0;
  RunConfig config;
  std::vector<TensorSpec> tensors;
  uint64_t spec_hash = 0;
  uint64_t initial_checksum = 0;
  uint64_t shard_elements = 0;
  std::unique_ptr<kernels::Codec> run_codec;
  std::unique_ptr<kernels::Codec> fp32_codec;
  // The shard's chunks in key order.
  std::vector<std::unique_ptr<ShardChunk>> chunks;
  absl::flat_hash_map<uint32_t, ShardChunk*> by_key;
  // The TernGrad chunks (those whose scalers are shared), in key order.
  std::vector<ShardChunk*> scaler_chunks;
  std::vector<uint32_t> keys;
  size_t feedback_chunks = 0;
};

}  // namespace tern::server

#endif  // TERN_SERVER_SHARD_RUN_H_
