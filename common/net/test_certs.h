// Certificates for tests, made with the openssl command-line tool: CAs and
// leaf certificates signed by them, as PEM files in one directory. Every
// leaf carries the names a loopback test connects to (DNS localhost, IP
// 127.0.0.1) and may serve and be a client. Test-only.
#ifndef TERN_COMMON_NET_TEST_CERTS_H_
#define TERN_COMMON_NET_TEST_CERTS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/net/tls_files.h"

namespace tern::net {

class TestCerts {
 public:
  // Files go under `dir`, which is created if needed.
  explicit TestCerts(std::string dir);

  // Whether `openssl` runs at all (tests skip without it).
  static bool OpensslAvailable();

  // A self-signed CA: <dir>/<name>.crt and <dir>/<name>.key.
  absl::Status MakeCa(const std::string& name);
  // A leaf with subject CN=<name>, signed by the CA `ca` made before, with
  // a fresh serial: <dir>/<name>.crt and <dir>/<name>.key. `uris` are added
  // to its subjectAltName (e.g. a tern identity, tern/certs.h).
  absl::Status MakeLeaf(const std::string& ca, const std::string& name,
                        const std::vector<std::string>& uris = {});

  std::string Cert(const std::string& name) const;
  std::string Key(const std::string& name) const;
  // The leaf `name`'s certificate and key, trusting the CA `ca`.
  TlsFiles Files(const std::string& name, const std::string& ca) const;
  const std::string& dir() const { return dir_; }

 private:
  // Runs `command` with its output in <dir>/openssl.log, which an error
  // quotes.
  absl::Status Run(const std::string& command) const;

  std::string dir_;
};

}  // namespace tern::net

#endif  // TERN_COMMON_NET_TEST_CERTS_H_
