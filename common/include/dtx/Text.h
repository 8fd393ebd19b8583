#pragma once
// Words for messages, shared by every layer that writes them.
#include <string>
#include <vector>

namespace dtx {

/// The items as a sentence lists them: "a, b or c" (`last` "or"), "a, b and c" (`last` "and");
/// one item alone, none empty.
std::string listed(const std::vector<std::string>& items, const char* last);

} // namespace dtx
