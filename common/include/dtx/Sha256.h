#pragma once
// SHA-256 of a text, as 64 lowercase hex digits: the key under which the store keeps each
// algorithm source and schedule template once, and the explorer names generated modules by.
#include <string>
#include <string_view>

namespace dtx {

std::string sha256_hex(std::string_view data);

} // namespace dtx
