#include "common/net/grpc_lifetime.h"

#include <grpc/grpc.h>

namespace tern::net {

void HoldGrpcUntilExit() { grpc_init(); }

}  // namespace tern::net
