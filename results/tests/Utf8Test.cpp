#include "dtx/results/Utf8.h"

#include <gtest/gtest.h>

using namespace dtx;

TEST(Utf8, ValidTextIsUnchanged) {
  for (const char* s : {"", "plain ascii", "\xC3\xA9t\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80",
                        "\xF4\x8F\xBF\xBF"})
    EXPECT_EQ(valid_utf8(s), s);
}

TEST(Utf8, EveryInvalidByteBecomesOneReplacement) {
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(valid_utf8("a\xFF"
                       "b"),
            "a" + r + "b");
  EXPECT_EQ(valid_utf8("\xC3"), r); // cut after the lead byte
  EXPECT_EQ(valid_utf8("\xA9"
                       "x"),
            r + "x");                                       // a continuation byte alone
  EXPECT_EQ(valid_utf8("\xC0\xAF"), r + r);                 // overlong `/`
  EXPECT_EQ(valid_utf8("\xED\xA0\x80"), r + r + r);         // a surrogate
  EXPECT_EQ(valid_utf8("\xF4\x90\x80\x80"), r + r + r + r); // past U+10FFFF
  EXPECT_EQ(valid_utf8("\xE2\x82"), r + r);
}

TEST(Utf8, CutsFallBetweenCharacters) {
  std::string s = "a\xC3\xA9\xE2\x82\xAC"; // a, é (2 bytes), € (3 bytes)
  EXPECT_EQ(utf8_floor(s, 0), 0u);
  EXPECT_EQ(utf8_floor(s, 2), 1u); // inside é
  EXPECT_EQ(utf8_floor(s, 3), 3u);
  EXPECT_EQ(utf8_floor(s, 5), 3u); // inside €
  EXPECT_EQ(utf8_floor(s, 99), s.size());
  EXPECT_EQ(utf8_tail(s, 2), ""); // only the last two bytes of €: no whole character
  EXPECT_EQ(utf8_tail(s, 4), "\xE2\x82\xAC");
  EXPECT_EQ(utf8_tail(s, 5), "\xC3\xA9\xE2\x82\xAC");
  std::string many;
  for (int i = 0; i < 5000; ++i)
    many += "\xC3\xA9";
  many += "x";
  std::string tail = utf8_tail(many, 4096);
  EXPECT_EQ(valid_utf8(tail), tail);
  EXPECT_EQ(tail.size(), 4095u);
}
