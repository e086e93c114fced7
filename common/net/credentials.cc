#include "common/net/credentials.h"

namespace tern::net {

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(
    const TransportSecurity& security) {
  switch (security.kind) {
    case TransportSecurity::Kind::kInsecure:
      return grpc::InsecureChannelCredentials();
  }
  return nullptr;  // unreachable: every Kind is handled above
}

std::shared_ptr<grpc::ServerCredentials> ServerCredentials(
    const TransportSecurity& security) {
  switch (security.kind) {
    case TransportSecurity::Kind::kInsecure:
      return grpc::InsecureServerCredentials();
  }
  return nullptr;  // unreachable: every Kind is handled above
}

}  // namespace tern::net
