#include "dtx/Text.h"

#include <gtest/gtest.h>

TEST(Listed, JoinsAsASentenceDoes) {
  EXPECT_EQ(dtx::listed({}, "or"), "");
  EXPECT_EQ(dtx::listed({"a"}, "or"), "a");
  EXPECT_EQ(dtx::listed({"a", "b"}, "or"), "a or b");
  EXPECT_EQ(dtx::listed({"a", "b", "c"}, "and"), "a, b and c");
}
