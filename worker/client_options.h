// The PsClientOptions a worker's flags ask for, in one place for
// `tern worker` (worker_main.cc) and the Python API's GradientExchange:
// the deadlines (--rpc_timeout_s, --join_timeout_s,
// --server_loss_timeout_s), --straggler_warn_s, --push_order and the
// transport (--tls_*). Under TLS only this run's servers may answer: its
// shards (--mode=terngrad) or its data center's LPS (the LPS modes).
#ifndef TERN_WORKER_CLIENT_OPTIONS_H_
#define TERN_WORKER_CLIENT_OPTIONS_H_

#include "worker/ps_client.h"
#include "worker/worker_options.h"

namespace tern::worker {

// `max_message_bytes`: the model's bound (MessageBytesBound).
PsClientOptions ClientOptionsFor(const WorkerOptions& options,
                                 int max_message_bytes);

}  // namespace tern::worker

#endif  // TERN_WORKER_CLIENT_OPTIONS_H_
