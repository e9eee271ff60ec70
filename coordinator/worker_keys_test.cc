#include "coordinator/worker_keys.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace rl {
namespace {

TEST(WorkerKeysTest, KeysArePerRegistrationAndSurviveARestart) {
  const std::string store_path = MakeTestDir() + "/coordinator.db";
  ASSERT_OK_AND_ASSIGN(const std::string secret, LoadKeySecret("", store_path));
  // The same secret from the same store: what the operator's tool reads.
  EXPECT_EQ(*LoadKeySecret("", store_path), secret);
  ASSERT_OK_AND_ASSIGN(auto store, RunStore::Open(store_path, 0));
  WorkerKeys keys(secret, store.get());
  ASSERT_OK(keys.Load());
  EXPECT_FALSE(keys.Issued("learner-0"));
  EXPECT_FALSE(keys.IsKey("learner-0", ""));

  const std::string first = keys.Issue("learner-0", /*keep=*/true);
  EXPECT_TRUE(keys.Issued("learner-0"));
  EXPECT_TRUE(keys.IsKey("learner-0", first));
  EXPECT_FALSE(keys.IsKey("learner-1", first));
  // Kept for the process that showed it; a new one revokes it.
  EXPECT_EQ(keys.Issue("learner-0", /*keep=*/true), first);
  const std::string second = keys.Issue("learner-0", /*keep=*/false);
  EXPECT_NE(second, first);
  EXPECT_FALSE(keys.IsKey("learner-0", first));
  EXPECT_TRUE(keys.IsKey("learner-0", second));

  // A coordinator restarted on the same store knows the current key.
  WorkerKeys restarted(secret, store.get());
  ASSERT_OK(restarted.Load());
  EXPECT_TRUE(restarted.IsKey("learner-0", second));
  EXPECT_FALSE(restarted.IsKey("learner-0", first));
  // Under another secret nothing matches.
  WorkerKeys other("another secret", store.get());
  ASSERT_OK(other.Load());
  EXPECT_FALSE(other.IsKey("learner-0", second));

  // Credentials are per name and per secret, never empty.
  EXPECT_TRUE(keys.IsCredential("learner-0", keys.Credential("learner-0")));
  EXPECT_EQ(keys.Credential("learner-0"),
            WorkerCredentialFromSecret(secret, "learner-0"));
  EXPECT_FALSE(keys.IsCredential("learner-1", keys.Credential("learner-0")));
  EXPECT_FALSE(other.IsCredential("learner-0", keys.Credential("learner-0")));
  EXPECT_FALSE(keys.IsCredential("learner-0", ""));

  // A lost worker's name is free: no key holds it any more.
  keys.Forget("learner-0");
  EXPECT_FALSE(keys.Issued("learner-0"));
  EXPECT_FALSE(keys.IsKey("learner-0", second));
}

}  // namespace
}  // namespace rl
