#include "common/net/credentials.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpc/grpc_security_constants.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"

namespace tern::net {
namespace {

using grpc::experimental::FileWatcherCertificateProvider;

// Reads `path` (the `what` file) and checks that it holds a PEM block.
absl::Status CheckPemFile(const std::string& path, const char* what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    const std::string message =
        absl::StrCat(what, " file ", path, ": ", std::strerror(error));
    if (error == ENOENT) return absl::NotFoundError(message);
    if (error == EACCES) return absl::PermissionDeniedError(message);
    return absl::FailedPreconditionError(message);
  }
  std::string text;
  char buffer[4096];
  ssize_t got = 0;
  // A PEM header is near the start; certificate bundles are small anyway.
  while (text.size() < (1 << 20) &&
         (got = ::read(fd, buffer, sizeof(buffer))) > 0) {
    text.append(buffer, static_cast<size_t>(got));
  }
  const int error = errno;
  ::close(fd);
  if (got < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, " file ", path, ": ", std::strerror(error)));
  }
  if (!absl::StrContains(text, "-----BEGIN ")) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " file ", path, ": no PEM block (\"-----BEGIN ...\") in it"));
  }
  return absl::OkStatus();
}

unsigned int RefreshSeconds(const TransportSecurity& security) {
  const int64_t seconds = absl::ToInt64Seconds(
      absl::Ceil(security.refresh_interval, absl::Seconds(1)));
  return static_cast<unsigned int>(std::clamp<int64_t>(seconds, 1, 86400));
}

bool HasIdentity(const TlsFiles& files) {
  return !files.cert.empty() && !files.key.empty();
}

}  // namespace

absl::Status CheckSecurity(const TransportSecurity& security, Side side) {
  if (security.kind == TransportSecurity::Kind::kInsecure) {
    return absl::OkStatus();
  }
  const TlsFiles& files = security.files;
  if (files.cert.empty() != files.key.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TLS needs a certificate and its key together; only the ",
        files.cert.empty() ? "key" : "certificate", " file is given"));
  }
  if (side == Side::kServer && files.cert.empty()) {
    return absl::InvalidArgumentError(
        "a TLS server needs a certificate and a key file (a CA file alone "
        "only verifies clients)");
  }
  if (side == Side::kClient && files.ca.empty()) {
    return absl::InvalidArgumentError(
        "a TLS client needs a CA file to verify the server against");
  }
  const struct {
    const std::string& path;
    const char* what;
  } named[] = {{files.cert, "TLS certificate"},
               {files.key, "TLS key"},
               {files.ca, "TLS CA"}};
  for (const auto& file : named) {
    if (file.path.empty()) continue;
    if (absl::Status status = CheckPemFile(file.path, file.what);
        !status.ok()) {
      return status;
    }
  }
  return absl::OkStatus();
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(
    const TransportSecurity& security) {
  switch (security.kind) {
    case TransportSecurity::Kind::kInsecure:
      return grpc::InsecureChannelCredentials();
    case TransportSecurity::Kind::kTls:
      break;
  }
  const TlsFiles& files = security.files;
  grpc::experimental::TlsChannelCredentialsOptions options;
  // gRPC asserts that a provider watches something; without a CA and an
  // identity there is nothing to watch, and gRPC's default roots apply.
  const bool identity = HasIdentity(files);
  if (identity || !files.ca.empty()) {
    options.set_certificate_provider(
        std::make_shared<FileWatcherCertificateProvider>(
            identity ? files.key : "", identity ? files.cert : "", files.ca,
            RefreshSeconds(security)));
  }
  if (!files.ca.empty()) options.watch_root_certs();
  if (identity) options.watch_identity_key_cert_pairs();
  // The default verifier checks the server's certificate against the
  // roots and its name against the target (or server_name, a channel
  // argument set in ChannelArgumentsFor).
  options.set_verify_server_certs(true);
  if (security.server_verifier != nullptr) {
    options.set_certificate_verifier(security.server_verifier);
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials =
      grpc::experimental::TlsCredentials(options);
  // Should gRPC refuse the options: TLS with its default roots, never
  // plaintext.
  if (credentials == nullptr) {
    return grpc::SslCredentials(grpc::SslCredentialsOptions());
  }
  return credentials;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(
    const TransportSecurity& security) {
  if (absl::Status status = CheckSecurity(security, Side::kServer);
      !status.ok()) {
    return status;
  }
  switch (security.kind) {
    case TransportSecurity::Kind::kInsecure:
      return grpc::InsecureServerCredentials();
    case TransportSecurity::Kind::kTls:
      break;
  }
  const TlsFiles& files = security.files;
  grpc::experimental::TlsServerCredentialsOptions options(
      std::make_shared<FileWatcherCertificateProvider>(
          files.key, files.cert, files.ca, RefreshSeconds(security)));
  options.watch_identity_key_cert_pairs();
  if (files.ca.empty()) {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  } else {
    options.watch_root_certs();
    options.set_cert_request_type(
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  }
  std::shared_ptr<grpc::ServerCredentials> credentials =
      grpc::experimental::TlsServerCredentials(options);
  if (credentials == nullptr) {
    return absl::InternalError("gRPC refused the TLS server credentials");
  }
  return credentials;
}

}  // namespace tern::net
