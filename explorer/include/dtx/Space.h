#pragma once
// The space of a schedule template for one algorithm and shape, expanded lazily.
//
// A point of the space is a choice vector: one alternative index per template variable (mixed
// radix, the last variable varying fastest), so the size before pruning is a product computed
// without enumerating, any index decodes to its schedule in O(variables), and sampling is
// drawing an index. Evaluating a point renders its statements, checks the `where` constraints,
// asks the compiler (dtc::Algorithm, statements parsed once and cached) and applies the
// shape rules; a rejected point carries the reason's stable code.
//
// Duplicates: a variable that no chosen statement uses (inside an absent optional statement or
// an alternative not taken) does not change the schedule; `normalize` sets such variables to
// their first alternative and enumeration visits only normalized points. Schedules that differ
// as written but mean the same kernel (the compiler's canonical form, spec section 1) are
// recognised by their canonical text.
#include "dtx/Template.h"

#include <dtc/Algorithm.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace dtx {

using ShapeSizes = std::map<std::string, std::int64_t>;

struct SpaceOptions {
  /// Prune blocks larger than their dimension rounded up to a power of two (they only add
  /// masked-off lanes to a smaller block's kernel). Needs the shape.
  bool prune_oversized_blocks = true;
  /// Run fusion and lowering for schedules where they can reject more (fused Funcs, blocked
  /// reductions). Off: such rejections surface when the candidate is compiled for measuring.
  bool lower_when_it_matters = true;
  /// The dtype explored (float32, float16, bfloat16), for `dtype.bytes` in constraints.
  std::string dtype;
};

struct Candidate {
  std::uint64_t index = 0;
  std::vector<int> choices;
  std::string schedule;  // the concrete statements, `;`-separated
  std::string canonical; // the compiler's canonical text (when ok)
  bool ok = false;
  std::string reason;  // why it was rejected: a compiler diagnostic code, `where`,
                       // `block-exceeds-dimension`, `map-split-does-not-divide`, `arithmetic`
  std::string message; // the first error's text
};

/// Reasons of the pruning the explorer adds to the compiler's (documented in docs/templates.md).
inline constexpr const char* kReasonWhere = "where";
inline constexpr const char* kReasonArithmetic = "arithmetic";
inline constexpr const char* kReasonOversizedBlock = "block-exceeds-dimension";
inline constexpr const char* kReasonSplit = "map-split-does-not-divide";
/// Not a rejection: the point sets a variable no chosen statement uses (see normalize).
inline constexpr const char* kReasonUnused = "unused-choice";

class Space {
public:
  /// Precondition: algorithm->ok(). Labels in `shape` size the dimensions for the shape rules
  /// and `size.v` in constraints (completed with complete_shape); `options.dtype` gives
  /// `dtype.bytes`.
  Space(std::shared_ptr<const dtc::Algorithm> algorithm, Template tmpl, ShapeSizes shape = {},
        SpaceOptions options = {});

  /// Points before pruning; saturates at UINT64_MAX (then overflowed() is true).
  std::uint64_t size() const { return size_; }
  bool overflowed() const { return overflowed_; }
  const Template& tmpl() const { return tmpl_; }
  const dtc::Algorithm& algorithm() const { return *algorithm_; }
  const ShapeSizes& shape() const { return shape_; }
  /// Alternatives per variable.
  const std::vector<int>& radices() const { return radices_; }

  std::vector<int> decode(std::uint64_t index) const;
  std::uint64_t encode(const std::vector<int>& choices) const;
  /// Variables no chosen statement or constraint uses, set to 0.
  std::vector<int> normalize(std::vector<int> choices) const;
  bool normalized(const std::vector<int>& choices) const { return normalize(choices) == choices; }

  /// Renders, constrains and checks one point. Thread-safe. With `only_normalized`, a point
  /// that is not normalized is answered at once with reason kReasonUnused.
  Candidate evaluate(const std::vector<int>& choices, bool only_normalized = false) const;
  Candidate at(std::uint64_t index) const { return evaluate(decode(index)); }
  /// A uniformly random normalized point (not necessarily valid).
  std::vector<int> sample(std::mt19937_64& rng) const;

  /// The concrete schedule text of a point (statements joined by `;\n`).
  std::string render(const std::vector<int>& choices) const;
  /// Each variable's value at a point, as the schedule reads it: the chosen alternative's text
  /// (`64`, `(y, x)`), `present` or `absent` for a `?` statement, and nullopt for a variable
  /// no chosen statement or constraint uses (it does not change the schedule).
  std::vector<std::optional<std::string>> values(const std::vector<int>& choices) const;

private:
  struct Rendered;
  bool render_into(const std::vector<int>& choices, Rendered& out, std::string& error) const;
  std::shared_ptr<const dtc::Statements> parsed(const std::string& text) const;
  std::optional<long long> eval(const TExpr& e, const std::vector<int>& choices, const Rendered& r,
                                std::string& error) const;
  std::string shape_rule(const dtc::ScheduleInfo& info, std::string& message) const;

  std::shared_ptr<const dtc::Algorithm> algorithm_;
  Template tmpl_;
  ShapeSizes shape_;
  SpaceOptions options_;
  std::vector<int> radices_;
  std::uint64_t size_ = 1;
  bool overflowed_ = false;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::shared_ptr<const dtc::Statements>> cache_;
};

/// Counts of an expansion.
struct ExpansionStats {
  std::uint64_t space_size = 0; // before pruning
  std::uint64_t visited = 0;    // normalized points evaluated
  std::uint64_t unused = 0;     // points skipped because a variable they set is unused
  std::uint64_t valid = 0;      // accepted by every check
  std::uint64_t distinct = 0;   // valid with a canonical text not seen before
  std::uint64_t duplicates = 0; // valid with a canonical text seen before
  std::map<std::string, std::uint64_t> rejected; // by reason
};

/// Walks a space in index order, yielding each distinct valid schedule once (the first point
/// with its canonical text). Memory: one 64-bit hash per distinct schedule. With `threads` > 1,
/// points are evaluated ahead in chunks by that many threads; the order and the results are the
/// same as with one.
class Enumerator {
public:
  explicit Enumerator(const Space& space, std::uint64_t begin = 0, std::uint64_t end = UINT64_MAX,
                      unsigned threads = 1);
  ~Enumerator();
  Enumerator(const Enumerator&) = delete;
  Enumerator& operator=(const Enumerator&) = delete;
  /// The next distinct valid candidate; with `rejected`, rejected points are returned too
  /// (ok false), but not unused-variable or duplicate points.
  std::optional<Candidate> next(bool rejected = false);
  const ExpansionStats& stats() const { return stats_; }
  /// Ends the walk early once `stop` answers true (asked every 64 points): next() then
  /// returns nothing and stopped() is true.
  void stop_when(std::function<bool()> stop) { stop_ = std::move(stop); }
  bool stopped() const { return stopped_; }

private:
  struct Parallel;
  /// The next evaluated point (normalized or not), in index order.
  std::optional<Candidate> step();
  const Space& space_;
  std::uint64_t pos_, end_;
  std::unordered_set<std::uint64_t> seen_;
  ExpansionStats stats_;
  std::unique_ptr<Parallel> parallel_;
  std::function<bool()> stop_;
  std::uint64_t steps_ = 0;
  bool stopped_ = false;
};

/// The canonical text's 64-bit hash used for deduplication.
std::uint64_t canonical_hash(const std::string& canonical);

/// What is wrong with `shape` as the sizes of `algorithm` (ok()), or "" when nothing: a label
/// the program does not declare, a size under 1, a label a call of a compiled Func needs with
/// no size (dtc::CallSizes: a label tied to another, as rms_norm's k to y, may be left out),
/// tied labels of different sizes. Every schedule's measurement would fail the same way.
std::string shape_problem(const dtc::Algorithm& algorithm, const ShapeSizes& shape);

/// `shape` with the sizes of the labels it leaves out that take another's (k = y for
/// rms_norm): what `size.k` and the shape rules of a Space see.
ShapeSizes complete_shape(const dtc::Algorithm& algorithm, ShapeSizes shape);

} // namespace dtx
