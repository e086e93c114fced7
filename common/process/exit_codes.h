// The process exit codes of every role, for Kubernetes' restart policy and
// the `tern launch` supervisor (DESIGN section 7).
#ifndef TERN_COMMON_PROCESS_EXIT_CODES_H_
#define TERN_COMMON_PROCESS_EXIT_CODES_H_

#include "absl/status/status.h"

namespace tern::process {

inline constexpr int kExitOk = 0;
// Permanent: a configuration error (a bad flag, an unwritable --port_file),
// a model the servers refuse, diverged replicas. Restarting does not help.
inline constexpr int kExitPermanent = 1;
// Transient: a peer unreachable or too slow, a port still held by a
// previous instance, workers that did not join in time. A restart may
// succeed. Every code >= 128 is transient; this is the one we choose.
inline constexpr int kExitTransient = 128;

// `tern launch`: the job could not be started or kept going for a reason
// outside the children's own exit codes (a shard that does not serve within
// --start_timeout_s or ends on its own before the workers, a failed fork or
// pipe). Transient, like a worker's transient failure.
inline constexpr int kExitStartFailure = kExitTransient;

// The shell's convention for a process ended by `signal` (SIGTERM: 143);
// >= 128, so transient.
inline constexpr int ExitCodeForSignal(int signal) { return 128 + signal; }

// `tern health`: the server answered, but not SERVING, or did not answer
// in time. 1, as Docker's HEALTHCHECK expects (Kubernetes' exec probes take
// any non-zero code).
inline constexpr int kExitUnhealthy = 1;

// kExitOk for OK; kExitTransient for the codes a restart can fix
// (UNAVAILABLE, DEADLINE_EXCEEDED, ABORTED, CANCELLED, RESOURCE_EXHAUSTED);
// kExitPermanent for every other.
int ExitCodeFor(const absl::Status& status);

}  // namespace tern::process

#endif  // TERN_COMMON_PROCESS_EXIT_CODES_H_
