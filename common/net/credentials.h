// How tern's connections are secured: the one place that turns a
// TransportSecurity into gRPC credentials, for channels and for servers
// alike (DESIGN section 7). Every channel and server of every role is
// created through common/net/channel.h and common/net/server.h, which take
// a TransportSecurity; nothing else builds gRPC credentials.
//
// TLS reads its PEM files through gRPC's FileWatcherCertificateProvider:
// the files are read again every refresh_interval, and a changed
// certificate, key or CA is used by every handshake after that (a rotation
// needs no restart; connections already open keep their session).
#ifndef TERN_COMMON_NET_CREDENTIALS_H_
#define TERN_COMMON_NET_CREDENTIALS_H_

#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/net/tls_files.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/security/tls_certificate_verifier.h"

namespace tern::net {

struct TransportSecurity {
  enum class Kind {
    // Plaintext: for loopback and tests, and explicit anywhere else.
    kInsecure,
    // TLS with the PEM files in `files`:
    // - a server needs cert and key; with a CA it requires a client
    //   certificate that chains to it (mTLS), without one it is
    //   server-side TLS only;
    // - a client needs the CA, which the server's certificate must chain
    //   to (and name the host it was asked for, or server_name); with cert
    //   and key it presents them (both or neither).
    kTls,
  };
  Kind kind = Kind::kInsecure;
  TlsFiles files;
  // Client only: the name the server's certificate must carry; empty: the
  // host of the address the channel connects to.
  std::string server_name;
  // Client only: what the server's certificate must say beyond its host
  // name (peer_identity.h's ServerIdentityVerifier: its role and run);
  // null: the host name alone.
  std::shared_ptr<grpc::experimental::CertificateVerifier> server_verifier;
  // How often the files are read again (whole seconds, at least 1).
  absl::Duration refresh_interval = absl::Seconds(10);
  // kInsecure only: plaintext was asked for (--insecure), also on
  // addresses beyond loopback (common/net/plaintext.h).
  bool plaintext_allowed = false;

  static TransportSecurity Insecure() { return TransportSecurity(); }
  static TransportSecurity Tls(TlsFiles files) {
    TransportSecurity security;
    security.kind = Kind::kTls;
    security.files = std::move(files);
    return security;
  }
};

enum class Side { kClient, kServer };

// Checks `security` for `side` before it is used: the files that side
// needs are named (INVALID_ARGUMENT otherwise), and each file named can be
// read and holds a PEM block ("-----BEGIN"); otherwise NOT_FOUND,
// PERMISSION_DENIED or INVALID_ARGUMENT naming the file. OK for
// kInsecure. gRPC itself only logs a file it cannot read (and then fails
// every handshake), so Server::Start and every client role's start call
// this.
absl::Status CheckSecurity(const TransportSecurity& security, Side side);

// Credentials for a client channel under `security`, which should have
// passed CheckSecurity(kClient): channels are lazy and cannot fail here.
// Never null and never less secure than asked: without a CA file the
// server is verified against gRPC's default roots, and a certificate
// without its key is not presented.
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(
    const TransportSecurity& security);

// Credentials for a listening port under `security`, after
// CheckSecurity(kServer), whose error is returned.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(
    const TransportSecurity& security);

}  // namespace tern::net

#endif  // TERN_COMMON_NET_CREDENTIALS_H_
