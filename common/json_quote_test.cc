#include "common/json_quote.h"

#include <string>

#include "gtest/gtest.h"

namespace rl {
namespace {

TEST(JsonQuoteTest, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(JsonQuote("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(JsonQuote("\x1b[2J\n\x7f"), "\"\\u001b[2J\\n\\u007f\"");
  EXPECT_EQ(JsonQuote("h\xc3\xa9"), "\"h\xc3\xa9\"");  // UTF-8 kept
}

TEST(JsonQuoteTest, QuoteForErrorCutsLongStringsAtACharacter) {
  EXPECT_EQ(QuoteForError("run-000001"), "\"run-000001\"");
  const std::string huge(1 << 20, 'r');
  const std::string quoted = QuoteForError(huge);
  EXPECT_LT(quoted.size(), 100u);
  EXPECT_EQ(quoted, "\"" + std::string(64, 'r') + "\"... (1048576 bytes)");
  // "é" is two bytes: a cut inside it backs off to before it.
  EXPECT_EQ(QuoteForError("ab\xc3\xa9", 3), "\"ab\"... (4 bytes)");
  EXPECT_EQ(QuoteForError("\x1b\x1b\x1b", 2),
            "\"\\u001b\\u001b\"... (3 bytes)");
}

}  // namespace
}  // namespace rl
