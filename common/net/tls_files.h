// The PEM files of one process's side of TLS (--tls_cert, --tls_key,
// --tls_ca; common/net/tls_flags.h). A plain struct with no gRPC in it, so
// that every role's options (server/ps_options.h, worker/worker_options.h,
// global/gs_options.h) can hold one; common/net/credentials.h turns it into
// gRPC credentials.
#ifndef TERN_COMMON_NET_TLS_FILES_H_
#define TERN_COMMON_NET_TLS_FILES_H_

#include <string>

namespace tern::net {

struct TlsFiles {
  // This process's certificate chain (leaf first), presented to the peer.
  std::string cert;
  // The private key of `cert`.
  std::string key;
  // The certificates a peer's chain must lead to: a server with a CA
  // requires and verifies client certificates (mTLS); a client verifies
  // the server against it.
  std::string ca;

  // How often the files are read again, in seconds (--tls_refresh_s): a
  // rotated certificate is used by the handshakes after that.
  int refresh_s = 10;

  // Whether any file is named: TLS is on.
  bool any() const { return !cert.empty() || !key.empty() || !ca.empty(); }
};

}  // namespace tern::net

#endif  // TERN_COMMON_NET_TLS_FILES_H_
