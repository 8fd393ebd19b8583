#include "frontend/Lexer.h"

#include <cctype>

namespace dtc {

const char* spelling(Tok kind) {
  switch (kind) {
  case Tok::End:
    return "end of input";
  case Tok::Ident:
    return "identifier";
  case Tok::Int:
    return "integer";
  case Tok::Float:
    return "number";
  case Tok::LParen:
    return "`(`";
  case Tok::RParen:
    return "`)`";
  case Tok::LBracket:
    return "`[`";
  case Tok::RBracket:
    return "`]`";
  case Tok::Comma:
    return "`,`";
  case Tok::Semicolon:
    return "`;`";
  case Tok::Colon:
    return "`:`";
  case Tok::Dot:
    return "`.`";
  case Tok::Assign:
    return "`=`";
  case Tok::Plus:
    return "`+`";
  case Tok::Minus:
    return "`-`";
  case Tok::Star:
    return "`*`";
  case Tok::Slash:
    return "`/`";
  case Tok::SlashSlash:
    return "`//`";
  case Tok::Percent:
    return "`%`";
  case Tok::Less:
    return "`<`";
  case Tok::LessEq:
    return "`<=`";
  case Tok::Greater:
    return "`>`";
  case Tok::GreaterEq:
    return "`>=`";
  case Tok::EqEq:
    return "`==`";
  case Tok::NotEq:
    return "`!=`";
  }
  return "token";
}

std::string describe(const Token& token) {
  switch (token.kind) {
  case Tok::Ident:
    return "identifier `" + token.text + "`";
  case Tok::Int:
  case Tok::Float:
    return "number `" + token.text + "`";
  default:
    return spelling(token.kind);
  }
}

namespace {

class Lexer {
public:
  Lexer(std::string_view src, DiagnosticEngine& diags, int source)
      : src_(src), diags_(diags), source_(source) {}

  std::vector<Token> run() {
    std::vector<Token> tokens;
    while (true) {
      skip_space_and_comments();
      Loc loc{line_, col_, source_};
      if (pos_ >= src_.size()) {
        tokens.push_back({Tok::End, "", loc});
        return tokens;
      }
      char c = src_[pos_];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t start = pos_;
        while (pos_ < src_.size() &&
               (std::isalnum(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_'))
          advance();
        tokens.push_back({Tok::Ident, std::string(src_.substr(start, pos_ - start)), loc});
        continue;
      }
      if (std::isdigit(static_cast<unsigned char>(c)) ||
          (c == '.' && pos_ + 1 < src_.size() &&
           std::isdigit(static_cast<unsigned char>(src_[pos_ + 1])))) {
        tokens.push_back(number(loc));
        continue;
      }
      advance();
      auto two = [&](char next, Tok yes, Tok no) {
        if (pos_ < src_.size() && src_[pos_] == next) {
          advance();
          return yes;
        }
        return no;
      };
      Tok kind;
      switch (c) {
      case '(':
        kind = Tok::LParen;
        break;
      case ')':
        kind = Tok::RParen;
        break;
      case '[':
        kind = Tok::LBracket;
        break;
      case ']':
        kind = Tok::RBracket;
        break;
      case ',':
        kind = Tok::Comma;
        break;
      case ';':
        kind = Tok::Semicolon;
        break;
      case ':':
        kind = Tok::Colon;
        break;
      case '.':
        kind = Tok::Dot;
        break;
      case '+':
        kind = Tok::Plus;
        break;
      case '-':
        kind = Tok::Minus;
        break;
      case '*':
        kind = Tok::Star;
        break;
      case '/':
        kind = two('/', Tok::SlashSlash, Tok::Slash);
        break;
      case '%':
        kind = Tok::Percent;
        break;
      case '<':
        kind = two('=', Tok::LessEq, Tok::Less);
        break;
      case '>':
        kind = two('=', Tok::GreaterEq, Tok::Greater);
        break;
      case '=':
        kind = two('=', Tok::EqEq, Tok::Assign);
        break;
      case '!':
        if (pos_ < src_.size() && src_[pos_] == '=') {
          advance();
          kind = Tok::NotEq;
          break;
        }
        [[fallthrough]];
      default: {
        unsigned char u = static_cast<unsigned char>(c);
        if (u >= 0x80) {
          // One error for a whole UTF-8 sequence (lead byte and continuation bytes).
          size_t start = pos_ - 1;
          while (pos_ < src_.size() && (static_cast<unsigned char>(src_[pos_]) & 0xC0) == 0x80)
            ++pos_;
          diags_.error(loc, "non-ASCII character `" +
                                std::string(src_.substr(start, pos_ - start)) +
                                "` in DT source; names and operators are ASCII");
          continue;
        }
        std::string shown = u >= 32 && u < 127 ? std::string("`") + c + "`" : "byte 0x" + hex(u);
        diags_.error(loc, "unexpected character " + shown + " in DT source");
        continue;
      }
      }
      tokens.push_back({kind, std::string(spelling_text(kind)), loc});
    }
  }

private:
  static std::string hex(unsigned char u) {
    const char* digits = "0123456789abcdef";
    return {digits[u >> 4], digits[u & 15]};
  }
  static std::string spelling_text(Tok kind) {
    std::string s = spelling(kind);
    return s.size() > 2 ? s.substr(1, s.size() - 2) : s;
  }

  void advance() {
    if (src_[pos_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++pos_;
  }

  void skip_space_and_comments() {
    while (pos_ < src_.size()) {
      char c = src_[pos_];
      if (c == '#') {
        while (pos_ < src_.size() && src_[pos_] != '\n')
          advance();
      } else if (std::isspace(static_cast<unsigned char>(c))) {
        advance();
      } else {
        return;
      }
    }
  }

  // number := digits [ '.' digits* ] [ exponent ] | '.' digits [ exponent ]
  // exponent := ('e'|'E') ['+'|'-'] digits
  Token number(Loc loc) {
    size_t start = pos_;
    bool is_float = false;
    auto digits = [&] {
      while (pos_ < src_.size() && std::isdigit(static_cast<unsigned char>(src_[pos_])))
        advance();
    };
    digits();
    if (pos_ < src_.size() && src_[pos_] == '.') {
      is_float = true;
      advance();
      digits();
    }
    if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      size_t save_pos = pos_;
      int save_col = col_;
      advance();
      if (pos_ < src_.size() && (src_[pos_] == '+' || src_[pos_] == '-')) advance();
      if (pos_ < src_.size() && std::isdigit(static_cast<unsigned char>(src_[pos_]))) {
        is_float = true;
        digits();
      } else {
        diags_.error({line_, save_col, source_}, "exponent of a number needs digits, as in `1e-3`");
        (void)save_pos;
        return {Tok::Float, std::string(src_.substr(start, pos_ - start)), loc};
      }
    }
    // `2x` is a typo, not a number followed by a name.
    if (pos_ < src_.size() &&
        (std::isalpha(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_')) {
      Loc bad{line_, col_, source_};
      while (pos_ < src_.size() &&
             (std::isalnum(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_'))
        advance();
      diags_.error(bad, "a number may not run into a name; put an operator or space between them");
    }
    std::string text(src_.substr(start, pos_ - start));
    return {is_float ? Tok::Float : Tok::Int, text, loc};
  }

  std::string_view src_;
  DiagnosticEngine& diags_;
  size_t pos_ = 0;
  int source_ = 0;
  int line_ = 1;
  int col_ = 1;
};

} // namespace

std::vector<Token> lex(std::string_view source, DiagnosticEngine& diags, int source_id) {
  return Lexer(source, diags, source_id).run();
}

} // namespace dtc
