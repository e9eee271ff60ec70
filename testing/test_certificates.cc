#include "testing/test_certificates.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace rl {

absl::Status MakeTestCertificates(const std::string& dir) {
  const std::string script = absl::StrCat("set -e; cd '", dir, "'", R"(
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
ca() { key "$1.key"; openssl req -x509 -new -key "$1.key" -out "$1.pem" -days 2 -subj "/CN=$1" 2>/dev/null; }
cert() {  # name ca days
  key "$1.key"
  openssl req -new -key "$1.key" -out "$1.csr" -subj "/CN=$1" 2>/dev/null
  printf "subjectAltName=IP:127.0.0.1,DNS:localhost\n" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial \
      -out "$1.pem" -days "$3" -extfile "$1.ext" 2>/dev/null
}
ca ca; ca other_ca
cert server ca 2; cert client ca 2; cert expired ca -1; cert stranger other_ca 2
)");
  if (std::system(script.c_str()) != 0) {
    return absl::InternalError(
        absl::StrCat("openssl could not make test certificates in ", dir));
  }
  return absl::OkStatus();
}

}  // namespace rl
