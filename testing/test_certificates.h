// Certificates for tests, made with openssl (EC P-256) into a directory:
//   ca.pem/.key, other_ca.pem/.key      two CAs
//   server.pem/.key, client.pem/.key    signed by ca, valid 2 days, SAN
//                                       IP:127.0.0.1 and DNS:localhost
//   expired.pem/.key                    signed by ca, expired yesterday
//   stranger.pem/.key                   signed by other_ca
#ifndef RL_TESTING_TEST_CERTIFICATES_H_
#define RL_TESTING_TEST_CERTIFICATES_H_

#include <string>

#include "absl/status/status.h"

namespace rl {

// INTERNAL if openssl fails.
absl::Status MakeTestCertificates(const std::string& dir);

}  // namespace rl

#endif  // RL_TESTING_TEST_CERTIFICATES_H_
