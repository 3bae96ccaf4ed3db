#include "base/mutex.h"
#include "server/http/auth.h"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

namespace tessera {
namespace {

constexpr size_t kTokenBytes = 32;

std::string Base64Url(const unsigned char* data, size_t size) {
  constexpr std::string_view kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  out.reserve((size * 4 + 2) / 3);
  size_t i = 0;
  for (; i + 3 <= size; i += 3) {
    uint32_t n = (uint32_t{data[i]} << 16) | (uint32_t{data[i + 1]} << 8) | data[i + 2];
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += kAlphabet[(n >> 6) & 63];
    out += kAlphabet[n & 63];
  }
  if (size - i == 1) {
    uint32_t n = uint32_t{data[i]} << 16;
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
  } else if (size - i == 2) {
    uint32_t n = (uint32_t{data[i]} << 16) | (uint32_t{data[i + 1]} << 8);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += kAlphabet[(n >> 6) & 63];
  }
  return out;
}

bool IsSpace(char c) { return c == ' ' || c == '\t'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) {
    s.remove_prefix(1);
  }
  while (!s.empty() && IsSpace(s.back())) {
    s.remove_suffix(1);
  }
  return s;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) {
    return false;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i] >= 'A' && a[i] <= 'Z' ? static_cast<char>(a[i] - 'A' + 'a') : a[i];
    char y = b[i] >= 'A' && b[i] <= 'Z' ? static_cast<char>(b[i] - 'A' + 'a') : b[i];
    if (x != y) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::string_view RoleName(Role role) {
  switch (role) {
    case Role::kAdmin:
      return "admin";
    case Role::kTenant:
      return "tenant";
    case Role::kAgent:
      return "agent";
    case Role::kMetrics:
      return "metrics";
    case Role::kNode:
      return "node";
  }
  return "unknown";
}

StatusOr<Role> ParseRole(std::string_view name) {
  for (Role role : {Role::kAdmin, Role::kTenant, Role::kAgent, Role::kMetrics, Role::kNode}) {
    if (name == RoleName(role)) {
      return role;
    }
  }
  return InvalidArgumentError("unknown role '" + std::string(name) +
                              "' (want admin, tenant, agent, metrics or node)");
}

std::string HashToken(std::string_view token) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  if (EVP_Digest(token.data(), token.size(), digest.data(), &length, EVP_sha256(), nullptr) != 1) {
    std::fputs("tessera: SHA-256 unavailable from OpenSSL\n", stderr);
    std::abort();
  }
  constexpr std::string_view kHex = "0123456789abcdef";
  std::string out;
  out.reserve(2 * size_t{length});
  for (unsigned int i = 0; i < length; ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 15];
  }
  return out;
}

std::string GenerateToken(std::string_view prefix) {
  std::array<unsigned char, kTokenBytes> bytes{};
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) {
    std::fputs("tessera: no randomness from OpenSSL RAND_bytes; refusing to make a token\n",
               stderr);
    std::abort();
  }
  std::string out(prefix);
  if (!out.empty()) {
    out += '_';
  }
  out += Base64Url(bytes.data(), bytes.size());
  return out;
}

Status CheckUserName(std::string_view user) {
  constexpr size_t kMaxUserLength = 128;  // as the job file's `user`
  if (user.empty() || user.size() > kMaxUserLength) {
    return InvalidArgumentError("user: a name of 1 to " + std::to_string(kMaxUserLength) +
                                " characters is required");
  }
  for (char c : user) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-' || c == '@';
    if (!ok) {
      return InvalidArgumentError("user: '" + std::string(user) +
                                  "' has characters other than A-Z a-z 0-9 . _ - @");
    }
  }
  return Status::Ok();
}

TokenRow MakeTokenRow(const std::string& hash, const Principal& who, int64_t created_us) {
  return TokenRow{hash,     std::string(RoleName(who.role)), who.tenant, who.name, created_us,
                  who.user};
}

StatusOr<Principal> PrincipalFromRow(const TokenRow& row) {
  auto role = ParseRole(row.role);
  if (!role.ok()) {
    return InvalidArgumentError("token '" + row.name + "': " + role.status().message());
  }
  return Principal{*role, row.tenant, row.name, row.user};
}

void TokenRegistry::Add(const std::string& hash, Principal who) {
  WriterLock lock(mu_);
  by_hash_.insert_or_assign(hash, std::move(who));
}

bool TokenRegistry::Remove(const std::string& hash) {
  WriterLock lock(mu_);
  return by_hash_.erase(hash) > 0;
}

Status TokenRegistry::AddRows(const std::vector<TokenRow>& rows) {
  std::vector<Principal> principals;
  principals.reserve(rows.size());
  for (const TokenRow& row : rows) {
    TESSERA_ASSIGN_OR_RETURN(Principal who, PrincipalFromRow(row));
    principals.push_back(std::move(who));
  }
  WriterLock lock(mu_);
  for (size_t i = 0; i < rows.size(); ++i) {
    by_hash_.insert_or_assign(rows[i].hash, std::move(principals[i]));
  }
  return Status::Ok();
}

StatusOr<Principal> TokenRegistry::Authenticate(std::string_view authorization) const {
  constexpr std::string_view kScheme = "bearer";
  std::string_view header = Trim(authorization);
  if (header.size() <= kScheme.size() ||
      !EqualsIgnoreCase(header.substr(0, kScheme.size()), kScheme) ||
      !IsSpace(header[kScheme.size()])) {
    return UnauthenticatedError("missing bearer token");
  }
  std::string_view token = Trim(header.substr(kScheme.size()));
  if (token.empty()) {
    return UnauthenticatedError("missing bearer token");
  }
  std::string hash = HashToken(token);
  ReaderLock lock(mu_);
  auto found = by_hash_.find(hash);
  if (found == by_hash_.end()) {
    return UnauthenticatedError("unknown token");
  }
  return found->second;
}

size_t TokenRegistry::size() const {
  ReaderLock lock(mu_);
  return by_hash_.size();
}

}  // namespace tessera
