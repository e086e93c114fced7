#include "tern/certs.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace tern::certs {
namespace {

// RFC 5280 section 4.1.2.2: a positive serial of at most 20 octets. The top
// bit of 159 is always set, so it is positive, non-zero and 158 bits random.
constexpr int kSerialBits = 159;
// notBefore lies this far in the past, for peers whose clocks lag.
constexpr long kBackdateSeconds = 5 * 60;

template <auto Free>
struct FreeWith {
  template <typename T>
  void operator()(T* p) const {
    Free(p);
  }
};
using BioPtr = std::unique_ptr<BIO, FreeWith<BIO_free_all>>;
using BignumPtr = std::unique_ptr<BIGNUM, FreeWith<BN_free>>;
using ExtensionPtr =
    std::unique_ptr<X509_EXTENSION, FreeWith<X509_EXTENSION_free>>;
using GeneralNamesPtr =
    std::unique_ptr<GENERAL_NAMES, FreeWith<GENERAL_NAMES_free>>;
using GeneralNamePtr =
    std::unique_ptr<GENERAL_NAME, FreeWith<GENERAL_NAME_free>>;

// "OpenSSL: <what> failed: <the errors OpenSSL queued>", emptying this
// thread's error queue so that the next failure reports only its own.
absl::Status OpensslError(absl::string_view what,
                          absl::StatusCode code = absl::StatusCode::kInternal) {
  std::string details;
  for (unsigned long error = ERR_get_error(); error != 0;
       error = ERR_get_error()) {
    char text[256];
    ERR_error_string_n(error, text, sizeof(text));
    absl::StrAppend(&details, details.empty() ? "" : "; ", text);
  }
  if (details.empty()) details = "no OpenSSL error queued";
  return absl::Status(code,
                      absl::StrCat("OpenSSL: ", what, " failed: ", details));
}

// The 4 or 16 bytes of an IPv4 or IPv6 address in text; false otherwise.
bool ParseIp(absl::string_view text, std::string* bytes) {
  const std::string host(text);
  unsigned char buffer[sizeof(in6_addr)];
  if (inet_pton(AF_INET, host.c_str(), buffer) == 1) {
    bytes->assign(reinterpret_cast<char*>(buffer), sizeof(in_addr));
    return true;
  }
  if (inet_pton(AF_INET6, host.c_str(), buffer) == 1) {
    bytes->assign(reinterpret_cast<char*>(buffer), sizeof(in6_addr));
    return true;
  }
  return false;
}

bool IsDnsLabel(absl::string_view label) {
  if (label.empty() || label.size() > 63) return false;
  if (label.front() == '-' || label.back() == '-') return false;
  for (const char c : label) {
    if (!absl::ascii_isalnum(c) && c != '-') return false;
  }
  return true;
}

absl::Status ValidateDays(int days) {
  if (days >= 1) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("validity of ", days, " days: must be at least 1"));
}

absl::StatusOr<KeyPtr> NewP256Key() {
  KeyPtr key(EVP_EC_gen("P-256"));
  if (key == nullptr) return OpensslError("generating a P-256 key");
  return key;
}

absl::Status SetRandomSerial(X509* cert) {
  BignumPtr serial(BN_new());
  if (serial == nullptr || BN_rand(serial.get(), kSerialBits, BN_RAND_TOP_ONE,
                                   BN_RAND_BOTTOM_ANY) != 1) {
    return OpensslError("drawing a random serial number");
  }
  if (BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert)) ==
      nullptr) {
    return OpensslError("setting the serial number");
  }
  return absl::OkStatus();
}

absl::Status AddNameEntry(X509_NAME* name, const char* field,
                          absl::string_view value) {
  if (X509_NAME_add_entry_by_txt(
          name, field, MBSTRING_UTF8,
          reinterpret_cast<const unsigned char*>(value.data()),
          static_cast<int>(value.size()), -1, 0) != 1) {
    return OpensslError(absl::StrCat("setting subject ", field, "=", value));
  }
  return absl::OkStatus();
}

// A v3 certificate for `key` with a random serial, valid from
// kBackdateSeconds ago for `days` days, subject O=tern, OU=<run_id>,
// CN=<common_name>; no issuer, extensions or signature yet.
absl::StatusOr<CertPtr> NewCert(EVP_PKEY* key, absl::string_view run_id,
                                absl::string_view common_name, int days) {
  CertPtr cert(X509_new());
  if (cert == nullptr || X509_set_version(cert.get(), X509_VERSION_3) != 1) {
    return OpensslError("creating a certificate");
  }
  if (absl::Status status = SetRandomSerial(cert.get()); !status.ok()) {
    return status;
  }
  if (X509_gmtime_adj(X509_getm_notBefore(cert.get()), -kBackdateSeconds) ==
          nullptr ||
      X509_time_adj_ex(X509_getm_notAfter(cert.get()), days, 0, nullptr) ==
          nullptr) {
    return OpensslError(absl::StrCat("setting a validity of ", days, " days"));
  }
  X509_NAME* subject = X509_get_subject_name(cert.get());  // owned by cert
  for (const auto& [field, value] :
       {std::pair<const char*, absl::string_view>{"O", "tern"},
        {"OU", run_id},
        {"CN", common_name}}) {
    if (absl::Status status = AddNameEntry(subject, field, value);
        !status.ok()) {
      return status;
    }
  }
  if (X509_set_pubkey(cert.get(), key) != 1) {
    return OpensslError("setting the certificate's public key");
  }
  return cert;
}

// Adds the extension `nid` written in OpenSSL's config syntax (`value` is
// one of our constants, never user input); `issuer` may be `cert` itself.
absl::Status AddConfExtension(X509* cert, X509* issuer, int nid,
                              const char* value) {
  X509V3_CTX context;
  X509V3_set_ctx_nodb(&context);
  X509V3_set_ctx(&context, issuer, cert, nullptr, nullptr, 0);
  ExtensionPtr extension(X509V3_EXT_conf_nid(nullptr, &context, nid, value));
  if (extension == nullptr || X509_add_ext(cert, extension.get(), -1) != 1) {
    return OpensslError(
        absl::StrCat("adding extension ", OBJ_nid2sn(nid), "=", value));
  }
  return absl::OkStatus();
}

struct ConfExtension {
  int nid;
  const char* value;
};

// The subject key identifier comes before the authority key identifier,
// which reads it from the issuer.
constexpr ConfExtension kCaExtensions[] = {
    {NID_basic_constraints, "critical,CA:TRUE,pathlen:0"},
    {NID_key_usage, "critical,keyCertSign,cRLSign"},
    {NID_subject_key_identifier, "hash"},
};
constexpr ConfExtension kLeafExtensions[] = {
    {NID_basic_constraints, "critical,CA:FALSE"},
    {NID_key_usage, "critical,digitalSignature"},
    {NID_ext_key_usage, "serverAuth,clientAuth"},
    {NID_subject_key_identifier, "hash"},
    {NID_authority_key_identifier, "keyid:always"},
};

template <size_t N>
absl::Status AddConfExtensions(X509* cert, X509* issuer,
                               const ConfExtension (&extensions)[N]) {
  for (const ConfExtension& extension : extensions) {
    if (absl::Status status =
            AddConfExtension(cert, issuer, extension.nid, extension.value);
        !status.ok()) {
      return status;
    }
  }
  return absl::OkStatus();
}

// Appends a GENERAL_NAME of `type` holding `value` (an IA5String for URIs
// and DNS names, the address bytes for GEN_IPADD).
absl::Status AppendGeneralName(GENERAL_NAMES* names, int type,
                               absl::string_view value) {
  GeneralNamePtr name(GENERAL_NAME_new());
  ASN1_STRING* text =
      type == GEN_IPADD ? ASN1_OCTET_STRING_new() : ASN1_IA5STRING_new();
  if (name == nullptr || text == nullptr ||
      ASN1_STRING_set(text, value.data(), static_cast<int>(value.size())) !=
          1) {
    ASN1_STRING_free(text);
    return OpensslError(absl::StrCat("encoding subjectAltName '", value, "'"));
  }
  GENERAL_NAME_set0_value(name.get(), type, text);  // name owns text now
  if (sk_GENERAL_NAME_push(names, name.get()) == 0) {
    return OpensslError("growing the subjectAltName list");
  }
  name.release();  // names owns it now
  return absl::OkStatus();
}

// subjectAltName: the identity URI first, then each distinct host as an IP
// address or a DNS name.
absl::Status AddSubjectAltNames(X509* cert, const LeafSpec& spec) {
  GeneralNamesPtr names(sk_GENERAL_NAME_new_null());
  if (names == nullptr) return OpensslError("allocating subjectAltName");
  absl::Status status =
      AppendGeneralName(names.get(), GEN_URI, net::PeerUri(spec.identity));
  absl::flat_hash_set<std::string> seen;
  for (const std::string& host : spec.hosts) {
    if (!status.ok()) break;
    if (!seen.insert(host).second) continue;
    std::string ip;
    status = ParseIp(host, &ip) ? AppendGeneralName(names.get(), GEN_IPADD, ip)
                                : AppendGeneralName(names.get(), GEN_DNS, host);
  }
  if (!status.ok()) return status;
  if (X509_add1_ext_i2d(cert, NID_subject_alt_name, names.get(), 0,
                        X509V3_ADD_DEFAULT) != 1) {
    return OpensslError("adding subjectAltName");
  }
  return absl::OkStatus();
}

std::string Ia5Text(const ASN1_IA5STRING* text) {
  return std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(text)),
                     ASN1_STRING_length(text));
}

// "127.0.0.1", "::1"; "<N bytes>" for a length that is no address.
std::string IpText(const ASN1_OCTET_STRING* bytes) {
  const int length = ASN1_STRING_length(bytes);
  const int family = length == 4 ? AF_INET : length == 16 ? AF_INET6 : 0;
  char text[INET6_ADDRSTRLEN] = {};
  if (family == 0 || inet_ntop(family, ASN1_STRING_get0_data(bytes), text,
                               sizeof(text)) == nullptr) {
    return absl::StrCat("<", length, " bytes>");
  }
  return text;
}

}  // namespace

std::string IdentityName(const Identity& identity) {
  if (identity.role == Role::kGlobal) return "global";
  return absl::StrCat(net::PeerRoleName(identity.role), "-", identity.id);
}

absl::Status ValidateRunId(absl::string_view run_id) {
  if (net::IsValidRunId(run_id)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "run id '", run_id, "': must be 1 to ", net::kMaxRunIdLength,
      " characters from letters, digits, '.', '_' and '-'"));
}

absl::Status ValidateHost(absl::string_view host) {
  std::string ip;
  if (ParseIp(host, &ip)) return absl::OkStatus();
  bool ok = !host.empty() && host.size() <= 253;
  for (absl::string_view label : absl::StrSplit(host, '.')) {
    ok = ok && IsDnsLabel(label);
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("host '", host,
                   "': not an IP address or a DNS name (labels of "
                   "letters, digits and '-', joined by '.')"));
}

absl::StatusOr<KeyAndCert> MakeCa(absl::string_view run_id, int days) {
  if (absl::Status status = ValidateRunId(run_id); !status.ok()) return status;
  if (absl::Status status = ValidateDays(days); !status.ok()) return status;
  absl::StatusOr<KeyPtr> key = NewP256Key();
  if (!key.ok()) return key.status();
  absl::StatusOr<CertPtr> cert = NewCert(key->get(), run_id, "tern CA", days);
  if (!cert.ok()) return cert.status();
  X509* ca = cert->get();
  if (X509_set_issuer_name(ca, X509_get_subject_name(ca)) != 1) {
    return OpensslError("setting the CA's issuer name");
  }
  if (absl::Status status = AddConfExtensions(ca, ca, kCaExtensions);
      !status.ok()) {
    return status;
  }
  if (X509_sign(ca, key->get(), EVP_sha256()) == 0) {
    return OpensslError("signing the CA certificate");
  }
  return KeyAndCert{*std::move(key), *std::move(cert)};
}

absl::StatusOr<KeyAndCert> IssueLeaf(const KeyAndCert& ca,
                                     const LeafSpec& spec) {
  if (ca.key == nullptr || ca.cert == nullptr ||
      X509_check_private_key(ca.cert.get(), ca.key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        "the CA's private key does not match its certificate");
  }
  absl::Status status = ValidateRunId(spec.identity.run_id);
  if (status.ok()) status = ValidateDays(spec.days);
  for (const std::string& host : spec.hosts) {
    if (status.ok()) status = ValidateHost(host);
  }
  if (!status.ok()) return status;
  absl::StatusOr<KeyPtr> key = NewP256Key();
  if (!key.ok()) return key.status();
  absl::StatusOr<CertPtr> cert = NewCert(
      key->get(), spec.identity.run_id, IdentityName(spec.identity), spec.days);
  if (!cert.ok()) return cert.status();
  X509* leaf = cert->get();
  if (X509_set_issuer_name(leaf, X509_get_subject_name(ca.cert.get())) != 1) {
    return OpensslError("setting the issuer name");
  }
  status = AddConfExtensions(leaf, ca.cert.get(), kLeafExtensions);
  if (status.ok()) status = AddSubjectAltNames(leaf, spec);
  if (!status.ok()) return status;
  if (X509_sign(leaf, ca.key.get(), EVP_sha256()) == 0) {
    return OpensslError(absl::StrCat("signing the certificate of ",
                                     net::PeerUri(spec.identity)));
  }
  return KeyAndCert{*std::move(key), *std::move(cert)};
}

absl::StatusOr<std::string> CertToPem(const X509& cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (bio == nullptr || PEM_write_bio_X509(bio.get(), &cert) != 1) {
    return OpensslError("writing a certificate as PEM");
  }
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, size);
}

absl::StatusOr<std::string> KeyToPem(const EVP_PKEY& key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (bio == nullptr ||
      PEM_write_bio_PrivateKey(bio.get(), &key, nullptr, nullptr, 0, nullptr,
                               nullptr) != 1) {
    return OpensslError("writing a private key as PEM");
  }
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, size);
}

absl::StatusOr<CertPtr> ParseCertPem(absl::string_view pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  CertPtr cert(bio == nullptr
                   ? nullptr
                   : PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (cert == nullptr) {
    return OpensslError("reading a PEM certificate",
                        absl::StatusCode::kInvalidArgument);
  }
  return cert;
}

absl::StatusOr<KeyPtr> ParseKeyPem(absl::string_view pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  KeyPtr key(bio == nullptr ? nullptr
                            : PEM_read_bio_PrivateKey(bio.get(), nullptr,
                                                      nullptr, nullptr));
  if (key == nullptr) {
    return OpensslError("reading a PEM private key",
                        absl::StatusCode::kInvalidArgument);
  }
  return key;
}

absl::StatusOr<SubjectAltNames> ReadSubjectAltNames(const X509& cert) {
  int critical = -1;
  GeneralNamesPtr names(static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(&cert, NID_subject_alt_name, &critical, nullptr)));
  SubjectAltNames result;
  if (names == nullptr) {
    if (critical == -1) return result;  // none
    if (critical == -2) {
      return absl::InvalidArgumentError(
          "the certificate has more than one subjectAltName extension");
    }
    return OpensslError("decoding subjectAltName",
                        absl::StatusCode::kInvalidArgument);
  }
  for (int i = 0; i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names.get(), i);
    if (name->type == GEN_URI) {
      result.uris.push_back(Ia5Text(name->d.uniformResourceIdentifier));
    } else if (name->type == GEN_DNS) {
      result.dns.push_back(Ia5Text(name->d.dNSName));
    } else if (name->type == GEN_IPADD) {
      result.ips.push_back(IpText(name->d.iPAddress));
    }
  }
  return result;
}

absl::StatusOr<std::vector<std::string>> SanUrisFromPem(absl::string_view pem) {
  absl::StatusOr<CertPtr> cert = ParseCertPem(pem);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<SubjectAltNames> names = ReadSubjectAltNames(**cert);
  if (!names.ok()) return names.status();
  return std::move(names->uris);
}

}  // namespace tern::certs
