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

TEST(Diagnostics, AnErrorRepeatedAtItsPlaceIsReportedOnceWithItsNotes) {
  DiagnosticEngine diags("t.dt", "a b\n");
  diags.error("x-code", Loc{1, 1}, "bad a");
  diags.note(Loc{1, 1}, "because");
  diags.error("x-code", Loc{1, 1}, "bad a"); // the same check of an expression lowered twice
  diags.note(Loc{1, 1}, "because");
  diags.error("x-code", Loc{1, 3}, "bad a");   // another place: kept
  diags.error("x-code", Loc{1, 1}, "worse a"); // other words: kept
  EXPECT_EQ(diags.error_count(), 3);
  ASSERT_EQ(diags.diagnostics().size(), 4u);
  EXPECT_EQ(diags.diagnostics()[1].severity, Severity::Note);
  EXPECT_EQ(diags.diagnostics()[2].loc.col, 3);
  EXPECT_EQ(diags.diagnostics()[3].message, "worse a");
}
