#include "frontend/Lexer.h"

#include <gtest/gtest.h>

using namespace dtc;

TEST(Lexer, NumbersWithExponents) {
  DiagnosticEngine diags("t.dt", "1 2.5 .5 1e-3 3E+2 7.");
  auto toks = lex("1 2.5 .5 1e-3 3E+2 7.", diags);
  ASSERT_FALSE(diags.has_errors()) << diags.render();
  ASSERT_EQ(toks.size(), 7u);
  EXPECT_EQ(toks[0].kind, Tok::Int);
  EXPECT_EQ(toks[1].kind, Tok::Float);
  EXPECT_EQ(toks[2].kind, Tok::Float);
  EXPECT_EQ(toks[3].text, "1e-3");
  EXPECT_EQ(toks[4].kind, Tok::Float);
  EXPECT_EQ(toks[5].kind, Tok::Float);
}

TEST(Lexer, CommentsAndLocations) {
  std::string src = "# c\nFunc f; # tail\n  In A;";
  DiagnosticEngine diags("t.dt", src);
  auto toks = lex(src, diags);
  ASSERT_EQ(toks[0].text, "Func");
  EXPECT_EQ(toks[0].loc.line, 2);
  EXPECT_EQ(toks[3].text, "In");
  EXPECT_EQ(toks[3].loc.line, 3);
  EXPECT_EQ(toks[3].loc.col, 3);
}

TEST(Lexer, BadCharacterReportedAndSkipped) {
  std::string src = "Func f$;";
  DiagnosticEngine diags("t.dt", src);
  auto toks = lex(src, diags);
  EXPECT_EQ(diags.error_count(), 1);
  EXPECT_NE(diags.render().find("t.dt:1:7: error: unexpected character `$`"), std::string::npos);
  EXPECT_EQ(toks.size(), 4u);
}
