// gRPC's library held open for the whole process.
#ifndef TERN_COMMON_NET_GRPC_LIFETIME_H_
#define TERN_COMMON_NET_GRPC_LIFETIME_H_

namespace tern::net {

// Takes a reference on gRPC's library (grpc_init) that is never given back,
// so that destroying the process's last gRPC object (a server, a channel)
// does not shut the library down. That last grpc_shutdown joins gRPC's
// executor threads, which sleep in epoll_wait until their next timer: with
// gRPC 1.51 a shard took up to 9 s to exit after SIGTERM, its main thread
// waiting in ~Server for an executor thread's 8.6 s poll to end. The
// process's exit frees what that shutdown would. Call once, from main,
// before any gRPC object exists, and only in a process whose signals do
// not go through a signalfd: the threads grpc_init starts keep the
// signals unblocked and would take them (tern launch calls it not).
void HoldGrpcUntilExit();

}  // namespace tern::net

#endif  // TERN_COMMON_NET_GRPC_LIFETIME_H_
