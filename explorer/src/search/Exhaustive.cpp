// exhaustive: every normalized point, in index order.
#include "SearchSupport.h"

namespace dtx {
namespace {

class Exhaustive final : public Strategy {
public:
  explicit Exhaustive(StrategyContext ctx)
      : ctx_(std::move(ctx)), size_(search::space_size(ctx_.radices)) {}
  std::string name() const override { return "exhaustive"; }
  bool learns() const override { return false; }
  std::vector<Point> propose(std::size_t n) override {
    std::vector<Point> out;
    while (out.size() < n && next_ < size_) {
      Point p = search::decode(ctx_.radices, next_++);
      Point q = ctx_.normalize ? ctx_.normalize(p) : p;
      if (q == p) out.push_back(std::move(p)); // others are the same schedule as a normalized one
    }
    return out;
  }
  void observe(const Point&, std::optional<double>) override {}

private:
  StrategyContext ctx_;
  std::uint64_t size_, next_ = 0;
};

} // namespace

std::unique_ptr<Strategy> make_exhaustive(StrategyContext context) {
  return std::make_unique<Exhaustive>(std::move(context));
}

} // namespace dtx
