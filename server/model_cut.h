// The model a join declares, cut into chunks (common/partitioner.h) by the
// shard (server/shard_run.h) and the LPS (server/local_ps.h) alike, but
// only once it is known to fit: a few bytes of ParamSpec may declare
// billions of chunks, and the partition makes one Chunk for each (issue
// 14). The model is counted and bounded first (core::SizeModel,
// core::CheckModelFits), and nothing is made for a model the servers
// could not carry.
#ifndef TERN_SERVER_MODEL_CUT_H_
#define TERN_SERVER_MODEL_CUT_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/partitioner.h"
#include "server/messages.h"

namespace tern::server {

// What a model must fit: `num_shards` servers whose messages carry at most
// `max_message_bytes`, and the flags to change when it does not.
struct ModelLimits {
  uint32_t num_shards = 1;
  uint64_t max_message_bytes = 0;
  absl::string_view remedy;
};

// The partition of `join`'s tensors at its partition_bytes over
// limits.num_shards shards. INVALID_ARGUMENT "param spec: ..." for a
// negative or too large shape or a model of no elements at all (a tensor
// of 0 elements beside others is fine), "partition: ..." for a
// partition_bytes below 4 or more chunks than keys; FAILED_PRECONDITION from
// core::CheckModelFits, ending with limits.remedy, for a model the shards
// could not carry. Checked before the partition is made.
absl::StatusOr<Partition> CutModel(const JoinRequest& join,
                                   const ModelLimits& limits);

}  // namespace tern::server

#endif  // TERN_SERVER_MODEL_CUT_H_
