// How tern's connections are secured: the one place that turns a
// TransportSecurity into gRPC credentials, for channels and for servers
// alike. Today only plaintext exists; TLS and mTLS (DESIGN section 7) are
// added here and nowhere else: every channel and server of every role is
// created through common/net/channel.h and common/net/server.h, which take
// a TransportSecurity.
#ifndef TERN_COMMON_NET_CREDENTIALS_H_
#define TERN_COMMON_NET_CREDENTIALS_H_

#include <memory>

#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"

namespace tern::net {

struct TransportSecurity {
  enum class Kind {
    // Plaintext: for loopback and tests, and explicit anywhere else.
    kInsecure,
  };
  Kind kind = Kind::kInsecure;

  static TransportSecurity Insecure() { return TransportSecurity(); }
};

// Credentials for a client channel / a listening port under `security`.
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(
    const TransportSecurity& security);
std::shared_ptr<grpc::ServerCredentials> ServerCredentials(
    const TransportSecurity& security);

}  // namespace tern::net

#endif  // TERN_COMMON_NET_CREDENTIALS_H_
