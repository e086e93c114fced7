// X.509 for tern's mTLS (DESIGN section 7): a certificate authority per run
// and one certificate per process identity, built with OpenSSL's libcrypto.
// `tern certs` (tern/certs_command.h) writes them into a folder that compose
// and Kubernetes mount.
//
// The identity URI (the contract every server checks on a caller)
// ---------------------------------------------------------------
// Each leaf certificate carries exactly one subjectAltName URI,
//
//   tern://<run_id>/<role>/<id>
//
// where <run_id> is the run's --run_id (letters, digits, '.', '_', '-'),
// <role> is one of
//
//   ps      a parameter-server shard        <id> = its --shard_index
//   worker  a training worker               <id> = its --worker_id
//   lps     a data center's local PS        <id> = its --datacenter
//   global  the global server               <id> = 0
//
// and <id> is a decimal number without leading zeros. A peer is who its
// certificate's URI says, provided the certificate chains to the run's CA:
// a server compares the URI's run with its own and allows the role and id
// to do only what that identity may do (a worker pushes only as itself, an
// LPS syncs only as its data center). Host names (DNS and IP SANs) are for
// the TLS handshake's host check only and never name an identity.
//
// Every leaf has serverAuth and clientAuth extended key usage (each process
// is both a client and a server), a random 159-bit serial, and an ECDSA
// P-256 key; the CA is self-signed with its own P-256 key.
//
// Ownership: the returned handles own their OpenSSL objects. Nothing here
// keeps state between calls; every function may be called from any thread
// (OpenSSL 3 initializes itself thread-safely).
#ifndef TERN_TERN_CERTS_H_
#define TERN_TERN_CERTS_H_

#include <openssl/evp.h>
#include <openssl/x509.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/net/peer_identity.h"

namespace tern::certs {

// Who a certificate speaks for: the identities the servers check
// (common/net/peer_identity.h, whose PeerUri writes the URI a certificate
// carries and whose ParsePeerUri reads it back).
using Role = net::PeerRole;
using Identity = net::PeerIdentity;

// "<role>-<id>", e.g. "worker-3"; "global" for the global server. The stem
// of the identity's files and its compose service name.
std::string IdentityName(const Identity& identity);

// INVALID_ARGUMENT unless `run_id` is 1 to 64 characters from
// [A-Za-z0-9._-] (it sits in the URI's authority).
absl::Status ValidateRunId(absl::string_view run_id);

// INVALID_ARGUMENT unless `host` is an IPv4 or IPv6 address or a DNS name
// (dot-separated labels of letters, digits and '-', at most 253 characters).
absl::Status ValidateHost(absl::string_view host);

struct X509Free {
  void operator()(X509* cert) const { X509_free(cert); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
using CertPtr = std::unique_ptr<X509, X509Free>;
using KeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;

// A private key and the certificate for it.
struct KeyAndCert {
  KeyPtr key;
  CertPtr cert;
};

// The run's CA: a fresh P-256 key and a self-signed certificate
// (CN "tern CA <run_id>", CA:TRUE with path length 0, keyCertSign) valid
// from 5 minutes ago (clock skew) for `days` days. INVALID_ARGUMENT for a
// bad run id or days < 1; INTERNAL naming the OpenSSL step that failed.
absl::StatusOr<KeyAndCert> MakeCa(absl::string_view run_id, int days);

// What a leaf certificate says besides its key.
struct LeafSpec {
  Identity identity;
  // DNS names and IP addresses (ValidateHost) it may be reached at, in
  // order; duplicates are dropped.
  std::vector<std::string> hosts;
  int days = 365;
};

// A fresh P-256 key and a certificate for `spec`, signed by `ca`.
// INVALID_ARGUMENT for a bad run id, host or days < 1; INTERNAL naming the
// OpenSSL step that failed.
absl::StatusOr<KeyAndCert> IssueLeaf(const KeyAndCert& ca,
                                     const LeafSpec& spec);

// PEM text of a certificate, and of a private key (unencrypted PKCS#8).
absl::StatusOr<std::string> CertToPem(const X509& cert);
absl::StatusOr<std::string> KeyToPem(const EVP_PKEY& key);

// The first certificate / private key in PEM text. INVALID_ARGUMENT when
// there is none or it does not parse.
absl::StatusOr<CertPtr> ParseCertPem(absl::string_view pem);
absl::StatusOr<KeyPtr> ParseKeyPem(absl::string_view pem);

// A certificate's subjectAltName entries by kind, in certificate order;
// IP addresses as text ("127.0.0.1", "::1"). All empty when it has no
// subjectAltName. INVALID_ARGUMENT when it has more than one such extension
// (ambiguous: refused rather than guessed) or one that does not parse.
struct SubjectAltNames {
  std::vector<std::string> uris;
  std::vector<std::string> dns;
  std::vector<std::string> ips;
};
absl::StatusOr<SubjectAltNames> ReadSubjectAltNames(const X509& cert);

// The SAN URIs of the first certificate in `pem`: what a server reads to
// learn who a peer is.
absl::StatusOr<std::vector<std::string>> SanUrisFromPem(absl::string_view pem);

}  // namespace tern::certs

#endif  // TERN_TERN_CERTS_H_
