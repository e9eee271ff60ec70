#include "learner/ppo_loss_terms.h"

#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

// Every kind of term has a name, and the fused path has said whether it
// implements it: a kind added without that fails here, so the fused path
// can never drop a term of the loss without a word.
TEST(PpoLossTermsTest, TheFusedPathImplementsOrRefusesEveryKind) {
  std::set<std::string> names;
  for (int k = 0; k < static_cast<int>(LossTermKind::kCount); ++k) {
    const auto kind = static_cast<LossTermKind>(k);
    const std::string name = LossTermName(kind);
    EXPECT_NE(name, "unknown") << "kind " << k << " has no name";
    EXPECT_TRUE(names.insert(name).second) << name << " named twice";
    const absl::Status status = FusedImplements(kind);
    EXPECT_TRUE(status.ok() ||
                status.code() == absl::StatusCode::kFailedPrecondition)
        << name << ": " << status;
  }
  // What a kind the fused path has not heard of gets.
  EXPECT_THAT(FusedImplements(LossTermKind::kCount),
              StatusIs(absl::StatusCode::kInternal,
                       HasSubstr("neither implements nor refuses")));
}

TEST(PpoLossTermsTest, TheTermsFollowTheConfig) {
  PPOConfig config;
  config.set_entropy_coef(0.01f);
  config.set_value_coef(0.5f);
  config.set_clip_value_loss(true);
  std::vector<LossTerm> terms = PpoLossTerms(config);
  ASSERT_EQ(terms.size(), 3u);
  EXPECT_EQ(terms[0].kind, LossTermKind::kClippedSurrogate);
  EXPECT_EQ(terms[0].coefficient, 1.0f);
  EXPECT_EQ(terms[1].kind, LossTermKind::kEntropyBonus);
  EXPECT_EQ(terms[1].coefficient, -0.01f);
  EXPECT_EQ(terms[2].kind, LossTermKind::kClippedValue);
  EXPECT_EQ(terms[2].coefficient, 0.5f);
  EXPECT_OK(FusedImplementsAll(terms));

  config.set_clip_value_loss(false);
  terms = PpoLossTerms(config);
  EXPECT_EQ(terms[2].kind, LossTermKind::kValue);
  EXPECT_OK(FusedImplementsAll(terms));
  // A list with a kind the fused path has no word on is refused as a bug.
  terms.push_back({LossTermKind::kCount, 1.0f});
  EXPECT_THAT(FusedImplementsAll(terms), StatusIs(absl::StatusCode::kInternal));
}

}  // namespace
}  // namespace rl
