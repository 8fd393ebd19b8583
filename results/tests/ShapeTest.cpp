#include "dtx/results/Store.h"

#include <gtest/gtest.h>

using namespace dtx::results;

TEST(Shape, KeySortsLabels) {
  EXPECT_EQ(shape_key({{"y", 32}, {"x", 16}}), "x=16,y=32");
  EXPECT_EQ(shape_key({{"batch", 8}}), "batch=8");
  EXPECT_EQ(shape_key({}), "");
}

TEST(Shape, ParseRoundTrips) {
  Shape shape{{"x", 16}, {"y", 32}, {"k_2", 4096}};
  EXPECT_EQ(parse_shape(shape_key(shape)), shape);
  EXPECT_EQ(parse_shape(" y = 32 , x=16 "), (Shape{{"x", 16}, {"y", 32}}));
  EXPECT_EQ(shape_key(parse_shape("y=32,x=16")), "x=16,y=32");
  EXPECT_EQ(parse_shape(""), Shape{});
  EXPECT_EQ(parse_shape("   "), Shape{});
  EXPECT_EQ(parse_shape("x=0"), (Shape{{"x", 0}}));
}

TEST(Shape, ParseNamesTheBadPart) {
  auto error = [](const std::string& text) -> std::string {
    try {
      parse_shape(text);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error("x=16,y").find("'y'"), std::string::npos) << error("x=16,y");
  EXPECT_NE(error("x=16,y=abc").find("'y=abc'"), std::string::npos);
  EXPECT_NE(error("x=16,y=3.5").find("'y=3.5'"), std::string::npos);
  EXPECT_NE(error("x=16,x=32").find("repeats"), std::string::npos);
  EXPECT_NE(error("=16").find("label"), std::string::npos);
  EXPECT_NE(error("1x=16").find("label"), std::string::npos);
  EXPECT_NE(error("x=-1").find("negative"), std::string::npos);
  EXPECT_NE(error("x=99999999999999999999").find("integer"), std::string::npos);
  EXPECT_NE(error("x=16,").find("''"), std::string::npos);
  EXPECT_NE(error("x=16,,y=2").find("''"), std::string::npos);
}

TEST(State, NamesRoundTrip) {
  for (State s : {State::Queued, State::Running, State::Done, State::Failed, State::Cancelled})
    EXPECT_EQ(parse_state(state_name(s)), s);
  EXPECT_EQ(state_name(State::Cancelled), "cancelled");
  EXPECT_EQ(state_name(State::Queued), "queued");
  EXPECT_FALSE(parse_state("Done"));
  EXPECT_FALSE(parse_state(""));
}
