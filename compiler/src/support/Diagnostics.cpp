#include "support/Diagnostics.h"

#include <algorithm>

namespace dtc {

void DiagnosticEngine::error(Loc loc, std::string message) {
  error(phase_, loc, std::move(message));
}

void DiagnosticEngine::error(const char* code, Loc loc, std::string message) {
  // The same error at the same place once (an expression inlined into two loops is lowered,
  // and checked, twice), and the notes that follow a repeat with it.
  skipping_repeat_ = false;
  for (const Diagnostic& d : diagnostics_)
    if (d.severity == Severity::Error && d.loc.line == loc.line && d.loc.col == loc.col &&
        d.loc.source == loc.source && d.message == message) {
      skipping_repeat_ = true;
      return;
    }
  ++error_count_;
  if (error_count_ == kMaxErrors + 1) {
    diagnostics_.push_back({Severity::Error, loc, "too many errors; stopping here", "too-many"});
    return;
  }
  if (error_count_ > kMaxErrors) return;
  diagnostics_.push_back({Severity::Error, loc, std::move(message), code});
}

void DiagnosticEngine::warning(Loc loc, std::string message) {
  skipping_repeat_ = false;
  diagnostics_.push_back({Severity::Warning, loc, std::move(message), "warning"});
}

void DiagnosticEngine::note(Loc loc, std::string message) {
  if (error_count_ > kMaxErrors || skipping_repeat_) return;
  diagnostics_.push_back({Severity::Note, loc, std::move(message), "note"});
}

static std::string_view line_of(std::string_view source, int line) {
  int current = 1;
  size_t start = 0;
  while (current < line) {
    size_t nl = source.find('\n', start);
    if (nl == std::string_view::npos) return {};
    start = nl + 1;
    ++current;
  }
  size_t end = source.find('\n', start);
  if (end == std::string_view::npos) end = source.size();
  if (end > start && source[end - 1] == '\r') --end; // CRLF files
  return source.substr(start, end - start);
}

std::string DiagnosticEngine::render() const {
  // Errors in source order, each followed by its notes (they were reported in pass order).
  std::vector<std::vector<const Diagnostic*>> groups;
  for (const Diagnostic& d : diagnostics_) {
    if (d.severity == Severity::Note && !groups.empty())
      groups.back().push_back(&d);
    else
      groups.push_back({&d});
  }
  std::stable_sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) {
    const Loc &x = a.front()->loc, &y = b.front()->loc;
    if (x.source != y.source) return x.source < y.source;
    if (x.line == 0 || y.line == 0) return x.line != 0 && y.line == 0;
    return x.line != y.line ? x.line < y.line : x.col < y.col;
  });
  std::vector<Diagnostic> ordered;
  for (const auto& g : groups)
    for (const Diagnostic* d : g)
      ordered.push_back(*d);
  std::string out;
  for (const Diagnostic& d : ordered) {
    const char* kind = d.severity == Severity::Error     ? "error"
                       : d.severity == Severity::Warning ? "warning"
                                                         : "note";
    const Source& src =
        sources_.at(d.loc.source < static_cast<int>(sources_.size()) ? d.loc.source : 0);
    out += src.name;
    if (d.loc.line > 0) out += ":" + std::to_string(d.loc.line) + ":" + std::to_string(d.loc.col);
    out += std::string(": ") + kind + ": " + d.message + "\n";
    if (d.loc.line <= 0) continue;
    std::string_view text = line_of(src.text, d.loc.line);
    if (text.empty() && d.loc.col <= 1) continue;
    std::string shown;
    for (char c : text)
      shown += (c == '\t') ? ' ' : (static_cast<unsigned char>(c) < 32 ? '?' : c);
    int col = std::max(1, std::min<int>(d.loc.col, static_cast<int>(shown.size()) + 1));
    // A long line (a generated sum of thousands of terms) is shown as a window around the caret.
    constexpr int kWidth = 100;
    if (static_cast<int>(shown.size()) > kWidth) {
      int start = std::max(0, col - 1 - kWidth / 2);
      int end = std::min<int>(shown.size(), start + kWidth);
      // Cut between characters, not inside a UTF-8 sequence (the window is shown as text).
      auto continuation = [&](int i) {
        return i < static_cast<int>(shown.size()) &&
               (static_cast<unsigned char>(shown[static_cast<size_t>(i)]) & 0xC0) == 0x80;
      };
      for (int k = 0; k < 3 && start > 0 && continuation(start); ++k)
        --start;
      for (int k = 0; k < 3 && end > start && continuation(end); ++k)
        --end;
      std::string window = shown.substr(start, end - start);
      if (start > 0) window = "..." + window;
      if (end < static_cast<int>(shown.size())) window += "...";
      col = col - start + (start > 0 ? 3 : 0);
      shown = window;
    }
    out += "  " + shown + "\n  ";
    out += std::string(col - 1, ' ') + "^\n";
  }
  return out;
}

} // namespace dtc
