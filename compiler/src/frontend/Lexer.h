#pragma once
// Lexer: DT source text -> tokens. Handles `#` comments, identifiers, integer and float literals
// (with exponents) and the punctuation of the language. Bad characters are reported and skipped.
#include "support/Diagnostics.h"

#include <string>
#include <string_view>
#include <vector>

namespace dtc {

enum class Tok {
  End,
  Ident,
  Int,
  Float,
  LParen,
  RParen,
  LBracket,
  RBracket,
  Comma,
  Semicolon,
  Colon,
  Dot,
  Assign,
  Plus,
  Minus,
  Star,
  Slash,
  SlashSlash,
  Percent,
  Less,
  LessEq,
  Greater,
  GreaterEq,
  EqEq,
  NotEq,
};

struct Token {
  Tok kind = Tok::End;
  std::string text;
  Loc loc;
};

/// Human-readable token description for diagnostics ("`;`", "identifier `x`", "end of file").
std::string describe(const Token& token);
const char* spelling(Tok kind);

/// Tokenizes `source`. Always ends with a Tok::End token. Lexical errors go to `diags`.
std::vector<Token> lex(std::string_view source, DiagnosticEngine& diags, int source_id = 0);

} // namespace dtc
