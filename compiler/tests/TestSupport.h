#pragma once
// Helpers shared by the compiler's unit tests.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

namespace dtc::testing {

/// The text of a conformance program (tests/conformance/FILE, in the repository).
inline std::string conformance(const std::string& file) {
  std::ifstream in(std::string(DTX_CONFORMANCE_DIR) + "/" + file);
  EXPECT_TRUE(in) << "cannot read " << file;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

} // namespace dtc::testing
