#include "common/net/peer_identity.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "grpc/grpc_security_constants.h"

namespace tern::net {
namespace {

constexpr absl::string_view kScheme = "tern://";

absl::Status BadUri(absl::string_view uri, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(
      "'", uri, "' is not a tern identity (tern://<run_id>/<role>/<id>): ",
      why));
}

std::string Describe(const PeerIdentity& identity) {
  return absl::StrCat(PeerRoleName(identity.role), " ", identity.id,
                      " of run '", identity.run_id, "'");
}

}  // namespace

absl::string_view PeerRoleName(PeerRole role) {
  switch (role) {
    case PeerRole::kPs:
      return "ps";
    case PeerRole::kWorker:
      return "worker";
    case PeerRole::kLps:
      return "lps";
    case PeerRole::kGlobal:
      return "global";
  }
  return "unknown";
}

bool IsValidRunId(absl::string_view run_id) {
  if (run_id.empty() || run_id.size() > kMaxRunIdLength) return false;
  for (char c : run_id) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' &&
        c != '_' && c != '-') {
      return false;
    }
  }
  return true;
}

std::string PeerUri(const PeerIdentity& identity) {
  return absl::StrCat(kScheme, identity.run_id, "/",
                      PeerRoleName(identity.role), "/", identity.id);
}

absl::StatusOr<PeerIdentity> ParsePeerUri(absl::string_view uri) {
  if (!absl::StartsWith(uri, kScheme)) {
    return BadUri(uri, "the scheme is not tern://");
  }
  const std::vector<absl::string_view> parts =
      absl::StrSplit(uri.substr(kScheme.size()), '/');
  if (parts.size() != 3) {
    return BadUri(uri, "it needs exactly three parts: run, role and id");
  }
  PeerIdentity identity;
  if (!IsValidRunId(parts[0])) {
    return BadUri(uri, "the run id needs 1 to 64 of [A-Za-z0-9._-]");
  }
  identity.run_id = std::string(parts[0]);
  bool known_role = false;
  for (PeerRole role :
       {PeerRole::kPs, PeerRole::kWorker, PeerRole::kLps, PeerRole::kGlobal}) {
    if (parts[1] == PeerRoleName(role)) {
      identity.role = role;
      known_role = true;
    }
  }
  if (!known_role) {
    return BadUri(uri, "the role is not one of ps, worker, lps, global");
  }
  const absl::string_view id = parts[2];
  const bool digits =
      !id.empty() && std::all_of(id.begin(), id.end(), [](char c) {
        return absl::ascii_isdigit(static_cast<unsigned char>(c));
      });
  if (!digits || (id.size() > 1 && id[0] == '0') ||
      !absl::SimpleAtoi(id, &identity.id)) {
    return BadUri(uri,
                  "the id is not a 32-bit decimal number without leading "
                  "zeros");
  }
  return identity;
}

absl::StatusOr<PeerIdentity> PeerIdentityOf(const grpc::AuthContext& context) {
  const std::vector<grpc::string_ref> uris =
      context.FindPropertyValues(GRPC_PEER_URI_PROPERTY_NAME);
  if (uris.empty()) {
    return absl::UnauthenticatedError(
        "the caller presented no certificate with a tern identity (a SAN URI "
        "tern://<run_id>/<role>/<id>, as `tern certs` issues)");
  }
  if (uris.size() > 1) {
    return absl::UnauthenticatedError(
        absl::StrCat("the caller's certificate names ", uris.size(),
                     " URIs; a tern identity is exactly one"));
  }
  const absl::string_view uri(uris[0].data(), uris[0].size());
  absl::StatusOr<PeerIdentity> identity = ParsePeerUri(uri);
  if (!identity.ok()) {
    return absl::UnauthenticatedError(absl::StrCat(
        "the caller's certificate: ", identity.status().message()));
  }
  return identity;
}

absl::Status CheckPeer(const grpc::AuthContext& context,
                       const ExpectedPeer& expected) {
  if (!expected.identity_required) return absl::OkStatus();
  absl::StatusOr<PeerIdentity> identity = PeerIdentityOf(context);
  if (!identity.ok()) return identity.status();
  const std::string wanted = absl::StrCat(PeerRoleName(expected.role), " ",
                                          expected.id);
  if (!expected.run_id.empty() && identity->run_id != expected.run_id) {
    return absl::PermissionDeniedError(absl::StrCat(
        "wrong run: the caller is ", Describe(*identity),
        ", and this server serves run '", expected.run_id, "'"));
  }
  if (identity->role != expected.role) {
    return absl::PermissionDeniedError(
        absl::StrCat("wrong role: the caller is ", Describe(*identity),
                     " and calls as ", wanted));
  }
  if (identity->id != expected.id) {
    return absl::PermissionDeniedError(
        absl::StrCat("wrong id: the caller is ", Describe(*identity),
                     " and calls as ", wanted));
  }
  return absl::OkStatus();
}

PeerPolicy PeerPolicy::For(const TransportSecurity& security,
                           std::string run_id) {
  PeerPolicy policy;
  policy.identity_required = security.kind == TransportSecurity::Kind::kTls &&
                             !security.files.ca.empty();
  policy.run_id = std::move(run_id);
  return policy;
}

ExpectedPeer PeerPolicy::Expect(PeerRole role, uint32_t id) const {
  ExpectedPeer expected;
  expected.identity_required = identity_required;
  expected.run_id = run_id;
  expected.role = role;
  expected.id = id;
  return expected;
}

absl::Status CheckCaller(const grpc::ServerContextBase& context,
                         const PeerPolicy& policy, PeerRole role,
                         uint32_t id) {
  if (!policy.identity_required) return absl::OkStatus();
  const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr) {
    return absl::UnauthenticatedError("the call has no auth context");
  }
  return CheckPeer(*auth, policy.Expect(role, id));
}

absl::Status CheckServerIdentity(const std::vector<std::string>& uris,
                                 const std::vector<PeerRole>& roles,
                                 absl::string_view run_id) {
  if (uris.size() != 1) {
    return absl::UnauthenticatedError(
        absl::StrCat("the server's certificate names ", uris.size(),
                     " SAN URIs, not one tern:// identity"));
  }
  absl::StatusOr<PeerIdentity> server = ParsePeerUri(uris[0]);
  if (!server.ok()) {
    return absl::UnauthenticatedError(
        absl::StrCat("the server's certificate: ", server.status().message()));
  }
  if (!run_id.empty() && server->run_id != run_id) {
    return absl::PermissionDeniedError(absl::StrCat(
        "the server is ", Describe(*server), ", not of run '", run_id, "'"));
  }
  std::vector<std::string> names;
  for (const PeerRole role : roles) {
    if (server->role == role) return absl::OkStatus();
    names.emplace_back(PeerRoleName(role));
  }
  return absl::PermissionDeniedError(
      absl::StrCat("the server is ", Describe(*server), ", not a ",
                   absl::StrJoin(names, " or a ")));
}

namespace {

class ServerIdentityCheck final
    : public grpc::experimental::ExternalCertificateVerifier {
 public:
  ServerIdentityCheck(std::vector<PeerRole> roles, std::string run_id)
      : roles_(std::move(roles)), run_id_(std::move(run_id)) {}

  bool Verify(grpc::experimental::TlsCustomVerificationCheckRequest* request,
              std::function<void(grpc::Status)> /*callback*/,
              grpc::Status* sync_status) override {
    // A custom verifier replaces gRPC's host-name check: run it first (it
    // answers synchronously).
    host_name_.Verify(
        request, [](grpc::Status) {}, sync_status);
    if (!sync_status->ok()) return true;
    std::vector<std::string> uris;
    for (const grpc::string_ref& uri : request->uri_names()) {
      uris.emplace_back(uri.data(), uri.size());
    }
    const absl::Status status = CheckServerIdentity(uris, roles_, run_id_);
    if (!status.ok()) {
      *sync_status = grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                                  std::string(status.message()));
    }
    return true;
  }
  void Cancel(grpc::experimental::TlsCustomVerificationCheckRequest*) override {
  }

 private:
  const std::vector<PeerRole> roles_;
  const std::string run_id_;
  grpc::experimental::HostNameCertificateVerifier host_name_;
};

}  // namespace

std::shared_ptr<grpc::experimental::CertificateVerifier> ServerIdentityVerifier(
    std::vector<PeerRole> roles, std::string run_id) {
  return grpc::experimental::ExternalCertificateVerifier::Create<
      ServerIdentityCheck>(std::move(roles), std::move(run_id));
}

}  // namespace tern::net
