#include "dtx/results/Utf8.h"

namespace dtx {

namespace {

/// The length of the well-formed UTF-8 sequence at `i`, or 0.
std::size_t sequence(std::string_view s, std::size_t i) {
  auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char b = byte(i);
  if (b < 0x80) return 1;
  std::size_t n;
  unsigned char lo = 0x80, hi = 0xBF; // the allowed range of the second byte (RFC 3629)
  if (b >= 0xC2 && b <= 0xDF) {
    n = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    n = 3;
    if (b == 0xE0) lo = 0xA0; // no overlong forms
    if (b == 0xED) hi = 0x9F; // no surrogates
  } else if (b >= 0xF0 && b <= 0xF4) {
    n = 4;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F; // nothing past U+10FFFF
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k)
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
  return n;
}

} // namespace

std::string valid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    std::size_t n = sequence(text, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD"; // U+FFFD
      ++i;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::size_t utf8_floor(std::string_view text, std::size_t pos) {
  if (pos >= text.size()) return text.size();
  // Back over at most three continuation bytes to the character's lead byte.
  std::size_t p = pos;
  while (p > 0 && pos - p < 3 && (static_cast<unsigned char>(text[p]) & 0xC0) == 0x80)
    --p;
  return (static_cast<unsigned char>(text[p]) & 0xC0) == 0x80 ? pos : p;
}

std::string utf8_tail(std::string_view text, std::size_t bytes) {
  if (text.size() <= bytes) return std::string(text);
  std::size_t start = text.size() - bytes;
  // Forward over continuation bytes to the next character.
  for (int k = 0;
       k < 3 && start < text.size() && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80;
       ++k)
    ++start;
  return std::string(text.substr(start));
}

} // namespace dtx
