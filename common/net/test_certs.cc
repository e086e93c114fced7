#include "common/net/test_certs.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tern::net {
namespace {

// `text` quoted for sh.
std::string Quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

// P-256 keys: fast to make, and every TLS stack takes them.
constexpr char kNewKey[] =
    "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";

}  // namespace

TestCerts::TestCerts(std::string dir) : dir_(std::move(dir)) {
  std::error_code ignored;
  std::filesystem::create_directories(dir_, ignored);
}

bool TestCerts::OpensslAvailable() {
  return std::system("openssl version >/dev/null 2>&1") == 0;
}

std::string TestCerts::Cert(const std::string& name) const {
  return absl::StrCat(dir_, "/", name, ".crt");
}

std::string TestCerts::Key(const std::string& name) const {
  return absl::StrCat(dir_, "/", name, ".key");
}

TlsFiles TestCerts::Files(const std::string& name,
                          const std::string& ca) const {
  TlsFiles files;
  files.cert = Cert(name);
  files.key = Key(name);
  files.ca = Cert(ca);
  return files;
}

absl::Status TestCerts::Run(const std::string& command) const {
  const std::string log = absl::StrCat(dir_, "/openssl.log");
  const int rc =
      std::system(absl::StrCat(command, " >", Quote(log), " 2>&1").c_str());
  if (rc == 0) return absl::OkStatus();
  std::ifstream in(log);
  std::stringstream output;
  output << in.rdbuf();
  return absl::InternalError(
      absl::StrCat("`", command, "` failed (", rc, "): ", output.str()));
}

absl::Status TestCerts::MakeCa(const std::string& name) {
  return Run(absl::StrCat("openssl req -x509 ", kNewKey, " -days 2 -subj ",
                          Quote(absl::StrCat("/CN=", name)), " -keyout ",
                          Quote(Key(name)), " -out ", Quote(Cert(name))));
}

absl::Status TestCerts::MakeLeaf(const std::string& ca,
                                 const std::string& name,
                                 const std::vector<std::string>& uris) {
  const std::string request = absl::StrCat(dir_, "/", name, ".csr");
  const std::string extensions = absl::StrCat(dir_, "/", name, ".ext");
  {
    std::ofstream out(extensions);
    out << "basicConstraints=CA:FALSE\n"
           "subjectAltName=DNS:localhost,IP:127.0.0.1";
    for (const std::string& uri : uris) out << ",URI:" << uri;
    out << "\n"
           "extendedKeyUsage=serverAuth,clientAuth\n";
    if (!out) return absl::InternalError("cannot write " + extensions);
  }
  if (absl::Status status = Run(absl::StrCat(
          "openssl req ", kNewKey, " -subj ", Quote(absl::StrCat("/CN=", name)),
          " -keyout ", Quote(Key(name)), " -out ", Quote(request)));
      !status.ok()) {
    return status;
  }
  // -CAcreateserial starts the CA's serials at a random number; each leaf
  // takes the next.
  return Run(absl::StrCat(
      "openssl x509 -req -days 2 -in ", Quote(request), " -CA ",
      Quote(Cert(ca)), " -CAkey ", Quote(Key(ca)), " -CAcreateserial -CAserial ",
      Quote(absl::StrCat(dir_, "/", ca, ".srl")), " -extfile ",
      Quote(extensions), " -out ", Quote(Cert(name))));
}

}  // namespace tern::net
