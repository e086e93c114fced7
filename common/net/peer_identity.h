// Who is calling: the tern identity an mTLS peer's certificate names, and
// the check every service makes that a caller acts only as itself (DESIGN
// section 7).
//
// The identity is the certificate's single subjectAltName URI,
// tern://<run_id>/<role>/<id> (the contract is written down in
// tern/certs.h, whose `tern certs` issues them). gRPC 1.51 hands a server
// the SAN URIs of a verified client certificate as the auth context's
// "peer_uri" property (GRPC_PEER_URI_PROPERTY_NAME), one value per URI.
// This file holds the one parser of that URI.
//
// Plaintext is the explicit insecure mode and server-side-only TLS has no
// client certificates: there a caller has no identity and nothing is
// checked. Only a server that requires client certificates (TLS with a
// CA) checks identities; PeerPolicy::For decides that from the server's
// TransportSecurity.
//
// Nothing here keeps state; every function may be called from any thread.
#ifndef TERN_COMMON_NET_PEER_IDENTITY_H_
#define TERN_COMMON_NET_PEER_IDENTITY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/net/credentials.h"
#include "grpcpp/security/auth_context.h"
#include "grpcpp/security/tls_certificate_verifier.h"
#include "grpcpp/server_context.h"

namespace tern::net {

enum class PeerRole { kPs, kWorker, kLps, kGlobal };

// "ps", "worker", "lps", "global": the <role> of the URI.
absl::string_view PeerRoleName(PeerRole role);

struct PeerIdentity {
  std::string run_id;
  PeerRole role = PeerRole::kPs;
  uint32_t id = 0;
};

// The longest run id: it sits in a certificate URI's authority.
inline constexpr size_t kMaxRunIdLength = 64;

// Whether `run_id` may be a run's id: 1 to 64 characters from
// [A-Za-z0-9._-].
bool IsValidRunId(absl::string_view run_id);

// "tern://<run_id>/<role>/<id>": what `tern certs` writes into a
// certificate (tern/certs.h) and ParsePeerUri reads back.
std::string PeerUri(const PeerIdentity& identity);

// "tern://<run_id>/<role>/<id>": a valid run id, one of the four roles and
// a decimal id without leading zeros that fits 32 bits, nothing else.
// INVALID_ARGUMENT naming the URI and what is wrong otherwise.
absl::StatusOr<PeerIdentity> ParsePeerUri(absl::string_view uri);

// The identity of a call's peer: its certificate's one SAN URI.
// UNAUTHENTICATED when the peer presented no URI, more than one, or one
// that is not a tern identity (the message says which).
absl::StatusOr<PeerIdentity> PeerIdentityOf(const grpc::AuthContext& context);

// Who a server expects on one call. Borrows `run_id`, which must outlive
// the CheckPeer call.
struct ExpectedPeer {
  // False (plaintext, or TLS without client certificates): CheckPeer is OK
  // whatever the call carries.
  bool identity_required = false;
  // The run the identity must name; empty: any run.
  absl::string_view run_id;
  PeerRole role = PeerRole::kPs;
  uint32_t id = 0;
};

// OK when no identity is required or the call's identity is `expected`;
// UNAUTHENTICATED when one is required and the call carries none
// (PeerIdentityOf); PERMISSION_DENIED naming the mismatch (wrong run,
// wrong role, wrong id) otherwise.
absl::Status CheckPeer(const grpc::AuthContext& context,
                       const ExpectedPeer& expected);

// What a server asks of every caller: set once at start, from its TLS
// set-up and --run_id, and read by its service on every call.
struct PeerPolicy {
  bool identity_required = false;
  // Empty: any run.
  std::string run_id;

  // Identities are required exactly when `security` is TLS with a CA (the
  // server then requires client certificates, i.e. mTLS).
  static PeerPolicy For(const TransportSecurity& security, std::string run_id);

  // `role` `id` under this policy; borrows run_id from *this.
  ExpectedPeer Expect(PeerRole role, uint32_t id) const;
};

// CheckPeer on a server call's auth context: the one check every
// service's methods make before anything reaches their plain class.
absl::Status CheckCaller(const grpc::ServerContextBase& context,
                         const PeerPolicy& policy, PeerRole role, uint32_t id);

// The client's side: the server it dials must present the identity of one
// of `roles` of `run_id` (any run when empty), so that another certificate
// of the run's CA (a worker's) cannot pose as a shard. The verifier goes
// into TransportSecurity::server_verifier; it checks the host name as
// gRPC's default verifier would, then the certificate's one SAN URI. A
// server that fails it is refused at the handshake (UNAVAILABLE on the
// call; gRPC logs the reason).
std::shared_ptr<grpc::experimental::CertificateVerifier> ServerIdentityVerifier(
    std::vector<PeerRole> roles, std::string run_id);

// The check ServerIdentityVerifier makes of the server's SAN URIs: OK, or
// UNAUTHENTICATED (not exactly one tern identity) or PERMISSION_DENIED
// (another run or role) naming what the server presented.
absl::Status CheckServerIdentity(const std::vector<std::string>& uris,
                                 const std::vector<PeerRole>& roles,
                                 absl::string_view run_id);

}  // namespace tern::net

#endif  // TERN_COMMON_NET_PEER_IDENTITY_H_
