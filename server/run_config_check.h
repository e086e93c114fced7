// The shard's checks of a join's run config (DESIGN section 3): whether it
// fits the shard at all, and whether a later joiner runs what the first
// joiner configured. Pure functions over plain messages.
#ifndef TERN_SERVER_RUN_CONFIG_CHECK_H_
#define TERN_SERVER_RUN_CONFIG_CHECK_H_

#include <cstdint>

#include "absl/status/status.h"
#include "server/messages.h"
#include "server/shard_run.h"

namespace tern::server {

// INVALID_ARGUMENT when `request` cannot be served by this shard: another
// mode, a worker id or counts other than the shard's flags, a join sent to
// the wrong shard, a clip that is not a finite number >= 0;
// PERMISSION_DENIED when the shard has a run id and the join names another.
absl::Status CheckJoinOptions(const JoinRequest& request,
                              const ShardLimits& limits);

// FAILED_PRECONDITION naming the first setting in which a later joiner
// differs from the run's first joiner ("seed 99 of worker 2 differs from 3
// of worker 0: ..."): the flags, the codec parameters, the fp32 chunks, the
// ParamSpec and, while `step` is 0, the initial parameter checksum (a worker
// that rejoins later shows its replica through CheckParams instead).
absl::Status CompareWithRun(const JoinRequest& request, const ShardRun& run,
                            uint64_t step);

}  // namespace tern::server

#endif  // TERN_SERVER_RUN_CONFIG_CHECK_H_
