#include "common/net/tls_flags.h"

#include "absl/strings/str_cat.h"
#include "common/flags/flags.h"
#include "common/net/peer_identity.h"
#include "common/net/plaintext.h"

namespace tern::net {

void AddTlsFlags(CLI::App* app, TlsFiles* files, const std::string& group) {
  CLI::Option* const added[] = {
      flags::Flag(app, "tls_cert", &files->cert,
                  "PEM certificate chain this process presents, with "
                  "--tls_key; with no --tls_* flag at all, connections are "
                  "plaintext"),
      flags::Flag(app, "tls_key", &files->key, "PEM private key of --tls_cert"),
      flags::Flag(app, "tls_refresh_s", &files->refresh_s,
                  "seconds between readings of the --tls_* files: a "
                  "replaced certificate, key or CA (a rotated Kubernetes "
                  "secret) is used by new connections after at most this")
          ->check(CLI::Range(1, 3600)),
      flags::Flag(app, "tls_ca", &files->ca,
                  "PEM CA certificate(s): a server requires client "
                  "certificates that chain to them (mTLS); a client verifies "
                  "its server against them"),
  };
  // CLI11 hides an option whose group is empty.
  if (group.empty()) return;
  for (CLI::Option* option : added) option->group(group);
}

absl::Status ValidateTlsFlags(const TlsFiles& files, TlsUse use) {
  if (files.cert.empty() != files.key.empty()) {
    return absl::InvalidArgumentError(
        files.cert.empty()
            ? "--tls_key needs --tls_cert, the certificate it is the key of"
            : "--tls_cert needs --tls_key, its private key");
  }
  const bool serves = use != TlsUse::kConnect;
  const bool connects = use != TlsUse::kServe;
  if (serves && !files.ca.empty() && files.cert.empty()) {
    return absl::InvalidArgumentError(
        "--tls_ca without --tls_cert and --tls_key: a server needs its own "
        "certificate and key to serve TLS");
  }
  if (connects && files.any() && files.ca.empty()) {
    return absl::InvalidArgumentError(
        "--tls_cert without --tls_ca: the connections this process opens "
        "need the CA to verify their server against");
  }
  return absl::OkStatus();
}

void AddInsecureFlag(CLI::App* app, bool* insecure, const std::string& group) {
  CLI::Option* option = flags::Switch(
      app, "insecure", insecure,
      "accept plaintext beyond loopback: without --tls_* files, listen (and "
      "reach the global server) on other machines' networks unencrypted "
      "and unauthenticated. Only for a network you trust");
  if (!group.empty()) option->group(group);
}

absl::Status ValidateInsecureFlag(const TlsFiles& files, bool insecure) {
  if (insecure && files.any()) {
    return absl::InvalidArgumentError(
        "--insecure with --tls_* files: give the files for TLS, or "
        "--insecure for plaintext, not both");
  }
  return absl::OkStatus();
}

void AddServingRunIdFlag(CLI::App* app, std::string* run_id) {
  flags::Flag(app, "run_id", run_id,
              "with --tls_ca: every caller's certificate must name this run "
              "(tern://<run_id>/<role>/<id>, as `tern certs` issues); empty: "
              "any run the CA signed for");
}

absl::Status ValidateServingRunId(absl::string_view run_id) {
  if (run_id.empty() || IsValidRunId(run_id)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--run_id: '", run_id, "' is not 1 to ", kMaxRunIdLength,
                   " of [A-Za-z0-9._-]"));
}

absl::Status ValidateServingTransport(const TlsFiles& files, bool insecure,
                                      TlsUse use, absl::string_view listen) {
  if (absl::Status status = ValidateTlsFlags(files, use); !status.ok()) {
    return status;
  }
  if (absl::Status status = ValidateInsecureFlag(files, insecure);
      !status.ok()) {
    return status;
  }
  return CheckPlaintext(SecurityFromFlags(files, insecure), listen,
                        "listen on");
}

TransportSecurity SecurityFromFlags(const TlsFiles& files, bool insecure) {
  if (files.any()) {
    TransportSecurity security = TransportSecurity::Tls(files);
    security.refresh_interval = absl::Seconds(files.refresh_s);
    return security;
  }
  TransportSecurity security = TransportSecurity::Insecure();
  security.plaintext_allowed = insecure;
  return security;
}

}  // namespace tern::net
