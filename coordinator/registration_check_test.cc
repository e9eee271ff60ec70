#include "coordinator/registration_check.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

RegisterWorkerRequest Valid() {
  RegisterWorkerRequest r;
  r.set_worker_name("learner-[::1]:5000");
  r.set_address("learner-0.learners.svc:50052");
  r.set_rendezvous_address("[fe80::1%eth0]:29500");
  r.mutable_capabilities()->add_devices("cuda:0");
  return r;
}

TEST(RegistrationCheckTest, NamesAddressesAndDevicesAreChecked) {
  EXPECT_OK(CheckRegistration(Valid()));
  RegisterWorkerRequest actor;  // no address: an actor
  actor.set_worker_name("actor-123");
  EXPECT_OK(CheckRegistration(actor));

  RegisterWorkerRequest r = Valid();
  r.set_worker_name("evil\x1b[2J");
  EXPECT_THAT(CheckRegistration(r),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("worker_name: 1 to 128 bytes")));
  r = Valid();
  r.set_worker_name(std::string(1 << 20, 'w'));
  EXPECT_THAT(CheckRegistration(r), StatusIs(absl::StatusCode::kInvalidArgument,
                                             HasSubstr("... (1048576 bytes)")));
  r = Valid();
  r.set_address("10.0.0.1:1 \r\nFAKE");
  EXPECT_THAT(CheckRegistration(r), StatusIs(absl::StatusCode::kInvalidArgument,
                                             HasSubstr("address: ")));
  r = Valid();
  for (int i = 0; i < 65; ++i) r.mutable_capabilities()->add_devices("cpu");
  EXPECT_THAT(CheckRegistration(r),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("capabilities.devices: at most 64")));
}

}  // namespace
}  // namespace rl
