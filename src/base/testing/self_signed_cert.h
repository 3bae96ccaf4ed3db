// Test-only: a self-signed certificate for 127.0.0.1 (subjectAltName IP:127.0.0.1, a CA
// so that a client may trust it as its own CA) and its key, for the tests of TLS
// servers and clients. Header-only and part of no target: include it from *_test.cc
// files of targets that link OpenSSL.
#pragma once

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <string>
#include <utility>

namespace tessera::testing {

// Writes the certificate and its key (PEM) to the two paths; false when any step fails.
inline bool WriteSelfSignedCert(const std::string& cert_path, const std::string& key_path) {
  EVP_PKEY* key = EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256");
  if (key == nullptr) {
    return false;
  }
  X509* cert = X509_new();
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("127.0.0.1"), -1, -1, 0);
  X509_set_issuer_name(cert, name);
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
  bool ok = true;
  for (auto [nid, value] : {std::pair{NID_subject_alt_name, "IP:127.0.0.1"},
                            std::pair{NID_basic_constraints, "critical,CA:TRUE"}}) {
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
    ok = ok && ext != nullptr && X509_add_ext(cert, ext, -1) == 1;
    X509_EXTENSION_free(ext);
  }
  ok = ok && X509_sign(cert, key, EVP_sha256()) > 0;
  FILE* c = std::fopen(cert_path.c_str(), "w");
  FILE* k = std::fopen(key_path.c_str(), "w");
  ok = ok && c != nullptr && k != nullptr && PEM_write_X509(c, cert) == 1 &&
       PEM_write_PrivateKey(k, key, nullptr, nullptr, 0, nullptr, nullptr) == 1;
  if (c != nullptr) {
    std::fclose(c);
  }
  if (k != nullptr) {
    std::fclose(k);
  }
  X509_free(cert);
  EVP_PKEY_free(key);
  return ok;
}

}  // namespace tessera::testing
