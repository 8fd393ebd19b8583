#pragma once
// Text that crosses into JSON or the store is valid UTF-8: a worker's stderr, a diagnostic that
// quotes a stray byte, a tail cut at a byte count. nlohmann::json refuses to dump anything else,
// so one such string made every read of its row fail.
#include <cstddef>
#include <string>
#include <string_view>

namespace dtx {

/// `text` with every byte that does not belong to a well-formed UTF-8 sequence (overlong forms,
/// surrogates and values past U+10FFFF included) replaced by U+FFFD; valid text is unchanged.
std::string valid_utf8(std::string_view text);

/// The largest position <= `pos` that does not fall inside a multi-byte character of `text`
/// (where to cut a prefix); `pos` past the end is the end.
std::size_t utf8_floor(std::string_view text, std::size_t pos);

/// The last `bytes` bytes of `text` at most, starting on a character boundary.
std::string utf8_tail(std::string_view text, std::size_t bytes);

} // namespace dtx
