#include "dtx/results/Store.h"

#include <cctype>
#include <charconv>
#include <string_view>

namespace dtx::results {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
    s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
    s.remove_suffix(1);
  return s;
}

bool is_label(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s.front()))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

[[noreturn]] void bad(std::string_view text, std::string_view part, std::string_view why) {
  throw std::invalid_argument("bad shape '" + std::string(text) + "': '" + std::string(part) +
                              "' " + std::string(why));
}

} // namespace

std::string shape_key(const Shape& shape) {
  std::string out;
  for (const auto& [label, size] : shape) {
    if (!out.empty()) out += ',';
    out += label;
    out += '=';
    out += std::to_string(size);
  }
  return out;
}

Shape parse_shape(const std::string& text) {
  Shape shape;
  std::string_view rest = text;
  if (trim(rest).empty()) return shape;
  while (true) {
    std::size_t comma = rest.find(',');
    std::string_view part = trim(rest.substr(0, comma));
    std::size_t eq = part.find('=');
    if (eq == std::string_view::npos) bad(text, part, "is not label=size");
    std::string_view label = trim(part.substr(0, eq));
    std::string_view digits = trim(part.substr(eq + 1));
    if (!is_label(label)) bad(text, part, "does not start with a label");
    std::int64_t size = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), size);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size())
      bad(text, part, "does not end with an integer size");
    if (size < 0) bad(text, part, "has a negative size");
    if (!shape.emplace(std::string(label), size).second) bad(text, part, "repeats its label");
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return shape;
}

} // namespace dtx::results
