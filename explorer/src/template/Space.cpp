// Lazy expansion of a schedule template (see Space.h).
#include "dtx/Space.h"

#include <climits>
#include <condition_variable>
#include <functional>
#include <set>
#include <thread>

namespace dtx {

struct Space::Rendered {
  std::vector<std::string> texts;            // present statements, rendered
  std::vector<const dtc::Statements*> parts; // the same, parsed
  std::vector<std::shared_ptr<const dtc::Statements>> holders;
  std::vector<char> used; // per variable
};

namespace {

/// The smallest power of two at least `v`, or `v` itself past 2^62 (no overflow).
long long next_power_of_two(long long v) {
  if (v > (1LL << 62)) return v;
  long long p = 1;
  while (p < v)
    p *= 2;
  return p;
}

/// Validates the names a constraint uses against the algorithm (at construction).
void check_constraint(const TExpr& e, const dtc::Algorithm& a, std::vector<TemplateError>& errors) {
  if (e.kind == TExpr::Kind::Field || e.kind == TExpr::Kind::Present) {
    bool found = false;
    for (const dtc::FuncInfo& f : a.funcs())
      found |= f.name == e.func;
    if (!found) errors.push_back({e.loc, "`" + e.func + "` is not a Func of the algorithm"});
    // present(F.prim) asks for any statement; F.prim.label reads the numbers of those whose
    // arguments are numbers (Space::eval).
    static const char* numbers[] = {"block",      "tensorize", "map",       "fuse_at",
                                    "atomic",     "precision", "num_warps", "num_stages",
                                    "persistent", "tma",       "subtile",   "warp_specialize"};
    bool known = false;
    for (const char* p : numbers)
      known |= e.prim == p;
    if (e.kind == TExpr::Kind::Present && !dtc::Algorithm::is_primitive(e.prim))
      errors.push_back({e.loc, "`" + e.prim + "` is not a scheduling primitive"});
    else if (e.kind == TExpr::Kind::Field && !known)
      errors.push_back({e.loc, "`" + e.prim +
                                   "` is not a scheduling primitive a constraint "
                                   "can read"});
  }
  if (e.a) check_constraint(*e.a, a, errors);
  if (e.b) check_constraint(*e.b, a, errors);
}

} // namespace

Space::Space(std::shared_ptr<const dtc::Algorithm> algorithm, Template tmpl, ShapeSizes shape,
             SpaceOptions options)
    : algorithm_(std::move(algorithm)), tmpl_(std::move(tmpl)),
      shape_(complete_shape(*algorithm_, std::move(shape))), options_(options) {
  std::vector<TemplateError> errors;
  for (const TExprPtr& c : tmpl_.constraints)
    check_constraint(*c, *algorithm_, errors);
  for (const TemplateStatement& s : tmpl_.statements) {
    bool found = false;
    for (const dtc::FuncInfo& f : algorithm_->funcs())
      found |= f.name == s.func;
    if (!found) errors.push_back({s.loc, "`" + s.func + "` is not a Func of the algorithm"});
  }
  if (!errors.empty()) throw TemplateParseError(errors, render_template_errors(errors, "template"));
  for (const Variable& v : tmpl_.variables) {
    int r = static_cast<int>(v.alternatives.size());
    radices_.push_back(r);
    if (!overflowed_ && size_ > UINT64_MAX / static_cast<std::uint64_t>(r)) {
      overflowed_ = true;
      size_ = UINT64_MAX;
    } else if (!overflowed_) {
      size_ *= static_cast<std::uint64_t>(r);
    }
  }
}

std::vector<int> Space::decode(std::uint64_t index) const {
  std::vector<int> c(radices_.size(), 0);
  for (size_t i = radices_.size(); i-- > 0;) {
    c[i] = static_cast<int>(index % static_cast<std::uint64_t>(radices_[i]));
    index /= static_cast<std::uint64_t>(radices_[i]);
  }
  return c;
}

std::uint64_t Space::encode(const std::vector<int>& choices) const {
  std::uint64_t index = 0;
  for (size_t i = 0; i < radices_.size(); ++i)
    index =
        index * static_cast<std::uint64_t>(radices_[i]) + static_cast<std::uint64_t>(choices[i]);
  return index;
}

std::shared_ptr<const dtc::Statements> Space::parsed(const std::string& text) const {
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    auto it = cache_.find(text);
    if (it != cache_.end()) return it->second;
  }
  auto p = std::make_shared<const dtc::Statements>(dtc::Algorithm::parse_statements(text));
  std::lock_guard<std::mutex> lock(cache_mutex_);
  if (cache_.size() > 100000) cache_.clear(); // bounded; holders keep their own references
  return cache_.emplace(text, std::move(p)).first->second;
}

std::optional<long long> Space::eval(const TExpr& e, const std::vector<int>& choices,
                                     const Rendered& r, std::string& error) const {
  using K = TExpr::Kind;
  switch (e.kind) {
  case K::Int:
    return e.value;
  case K::Tie: {
    const Pieces& alt = tmpl_.variables[e.var].alternatives[choices[e.var]];
    if (alt.size() == 1 && alt[0].kind == Piece::Kind::Int)
      return eval(*alt[0].expr, choices, r, error);
    if (alt.size() == 1 && alt[0].kind == Piece::Kind::Choice) {
      TExpr inner;
      inner.kind = K::Tie;
      inner.var = alt[0].var;
      return eval(inner, choices, r, error);
    }
    if (alt.size() == 1 && alt[0].kind == Piece::Kind::Text) {
      const std::string& t = alt[0].text;
      if (!t.empty() && t.size() < 19 && t.find_first_not_of("0123456789") == std::string::npos)
        return std::stoll(t);
    }
    error = "`$" + e.label + "` is not a number here, so it cannot be used in arithmetic";
    return std::nullopt;
  }
  case K::Size: {
    auto it = shape_.find(e.label);
    if (it == shape_.end()) {
      error = "`size." + e.label + "` needs the shape to give `" + e.label + "`";
      return std::nullopt;
    }
    return it->second;
  }
  case K::Bytes: {
    if (options_.dtype == "float32") return 4;
    if (options_.dtype == "float16" || options_.dtype == "bfloat16") return 2;
    error = options_.dtype.empty()
                ? "`dtype.bytes` needs the dtype explored (the template file's `dtype:`)"
                : "`dtype.bytes`: unknown dtype `" + options_.dtype + "`";
    return std::nullopt;
  }
  case K::Present: {
    for (const dtc::Statements* p : r.parts)
      for (const auto& s : p->statements())
        if (s.func == e.func && s.primitive == e.prim) return 1;
    return 0;
  }
  case K::Field: {
    // The value the last statement of F.prim gives the label (or the single value).
    std::optional<long long> v;
    for (const dtc::Statements* p : r.parts)
      for (const auto& s : p->statements()) {
        if (s.func != e.func || s.primitive != e.prim) continue;
        for (const auto& a : s.args) {
          if (e.label.empty() && a.name.empty()) v = a.value;
          if (!e.label.empty() && a.name == e.label) v = a.has_value ? a.value : 1;
        }
      }
    if (v) return v;
    if (e.prim == "num_warps") return 4;
    if (e.prim == "num_stages") return 3;
    if (e.prim == "tensorize") return 1;
    if (e.prim == "block" && !e.label.empty()) {
      auto it = shape_.find(e.label); // an unblocked dimension is one block of the whole size
      return it == shape_.end() ? 0 : it->second;
    }
    return 0;
  }
  case K::Unary: {
    auto a = eval(*e.a, choices, r, error);
    if (!a) return a;
    if (e.op == "-" && *a == LLONG_MIN) {
      error = "-(" + std::to_string(*a) + ") overflows a 64-bit integer";
      return std::nullopt;
    }
    return e.op == "not" ? static_cast<long long>(*a == 0) : -*a;
  }
  case K::Binary: {
    auto a = eval(*e.a, choices, r, error);
    if (!a) return a;
    if (e.op == "and" && !*a) return 0;
    if (e.op == "or" && *a) return 1;
    auto b = eval(*e.b, choices, r, error);
    if (!b) return b;
    const std::string& op = e.op;
    if (op == "+" || op == "-" || op == "*") {
      long long v = 0;
      bool overflow = op == "+"   ? __builtin_add_overflow(*a, *b, &v)
                      : op == "-" ? __builtin_sub_overflow(*a, *b, &v)
                                  : __builtin_mul_overflow(*a, *b, &v);
      if (overflow) {
        error = std::to_string(*a) + " " + op + " " + std::to_string(*b) +
                " overflows a 64-bit integer";
        return std::nullopt;
      }
      return v;
    }
    if (op == "/" || op == "%") {
      if (*b == 0) {
        error = "division by zero";
        return std::nullopt;
      }
      if (*a == LLONG_MIN && *b == -1) {
        error = std::to_string(*a) + " " + op + " -1 overflows a 64-bit integer";
        return std::nullopt;
      }
      return op == "/" ? *a / *b : *a % *b;
    }
    if (op == "<") return *a < *b;
    if (op == "<=") return *a <= *b;
    if (op == ">") return *a > *b;
    if (op == ">=") return *a >= *b;
    if (op == "==") return *a == *b;
    if (op == "!=") return *a != *b;
    if (op == "and" || op == "or") return *b != 0;
    error = "unknown operator `" + op + "`";
    return std::nullopt;
  }
  }
  return std::nullopt;
}

bool Space::render_into(const std::vector<int>& choices, Rendered& out, std::string& error) const {
  out.used.assign(tmpl_.variables.size(), 0);
  out.texts.clear();
  out.parts.clear();
  bool good = true;
  // Ties a constraint reads are used (the constraint's outcome depends on them).
  std::function<void(const TExpr&)> mark = [&](const TExpr& e) {
    if (e.kind == TExpr::Kind::Tie) out.used[e.var] = 1;
    if (e.a) mark(*e.a);
    if (e.b) mark(*e.b);
  };
  for (const TExprPtr& c : tmpl_.constraints)
    mark(*c);
  std::function<void(const Pieces&, std::string&)> render = [&](const Pieces& pieces,
                                                                std::string& text) {
    for (const Piece& p : pieces) {
      switch (p.kind) {
      case Piece::Kind::Text:
        text += p.text;
        break;
      case Piece::Kind::Choice:
        out.used[p.var] = 1;
        render(tmpl_.variables[p.var].alternatives[choices[p.var]], text);
        break;
      case Piece::Kind::Int: {
        mark(*p.expr);
        std::string why;
        auto v = eval(*p.expr, choices, out, why);
        if (!v) {
          if (good) error = why;
          good = false;
        } else {
          text += std::to_string(*v);
        }
        break;
      }
      }
    }
  };
  for (const TemplateStatement& s : tmpl_.statements) {
    if (s.optional_var >= 0) {
      out.used[s.optional_var] = 1;
      if (choices[s.optional_var] == 0) continue;
    }
    std::string text;
    render(s.pieces, text);
    out.texts.push_back(std::move(text));
  }
  return good;
}

std::vector<int> Space::normalize(std::vector<int> choices) const {
  Rendered r;
  std::string error;
  render_into(choices, r, error);
  for (size_t i = 0; i < choices.size(); ++i)
    if (!r.used[i]) choices[i] = 0;
  return choices;
}

std::string Space::render(const std::vector<int>& choices) const {
  Rendered r;
  std::string error;
  render_into(choices, r, error);
  std::string out;
  for (const std::string& t : r.texts)
    out += (out.empty() ? "" : ";\n") + t;
  return out;
}

std::vector<std::optional<std::string>> Space::values(const std::vector<int>& choices) const {
  Rendered r;
  std::string error;
  render_into(choices, r, error);
  std::function<void(const Pieces&, std::string&)> text_of = [&](const Pieces& pieces,
                                                                 std::string& text) {
    for (const Piece& p : pieces) {
      if (p.kind == Piece::Kind::Text) {
        text += p.text;
      } else if (p.kind == Piece::Kind::Choice) {
        text_of(tmpl_.variables[p.var].alternatives[choices[p.var]], text);
      } else {
        std::string why;
        auto v = eval(*p.expr, choices, r, why);
        text += v ? std::to_string(*v) : "?";
      }
    }
  };
  std::vector<std::optional<std::string>> out(tmpl_.variables.size());
  for (size_t i = 0; i < out.size() && i < choices.size(); ++i) {
    if (!r.used[i]) continue;
    const Variable& v = tmpl_.variables[i];
    if (v.kind == Variable::Kind::Optional) {
      out[i] = choices[i] ? "present" : "absent";
      continue;
    }
    std::string text;
    text_of(v.alternatives[choices[i]], text);
    out[i] = text;
  }
  return out;
}

std::vector<int> Space::sample(std::mt19937_64& rng) const {
  std::vector<int> c(radices_.size());
  for (size_t i = 0; i < c.size(); ++i)
    c[i] = std::uniform_int_distribution<int>(0, radices_[i] - 1)(rng);
  return normalize(std::move(c));
}

std::string Space::shape_rule(const dtc::ScheduleInfo& info, std::string& message) const {
  for (const dtc::FuncScheduleInfo& f : info.funcs)
    for (const dtc::LabelSchedule& l : f.labels) {
      auto it = shape_.find(l.label);
      if (it == shape_.end()) continue;
      long long size = it->second;
      if (options_.prune_oversized_blocks && l.block > 0 && size > 0 &&
          l.block > next_power_of_two(size)) {
        message = "block " + std::to_string(l.block) + " of `" + f.func + "." + l.label +
                  "` is larger than the dimension (" + std::to_string(size) + ")";
        return kReasonOversizedBlock;
      }
      if (l.split > 0) {
        long long blocks = l.block > 0 ? (size + l.block - 1) / l.block : 1;
        if (blocks % l.split != 0) {
          message = "`map` splits the " + std::to_string(blocks) + " blocks of `" + l.label +
                    "` by " + std::to_string(l.split) + ", which does not divide them";
          return kReasonSplit;
        }
      }
    }
  return "";
}

Candidate Space::evaluate(const std::vector<int>& choices, bool only_normalized) const {
  Candidate c;
  c.choices = choices;
  c.index = encode(choices);
  Rendered r;
  std::string error;
  bool rendered = render_into(choices, r, error);
  if (only_normalized)
    for (size_t i = 0; i < choices.size(); ++i)
      if (!r.used[i] && choices[i] != 0) {
        c.reason = kReasonUnused;
        return c;
      }
  for (const std::string& t : r.texts)
    c.schedule += (c.schedule.empty() ? "" : ";\n") + t;
  if (!rendered) {
    c.reason = kReasonArithmetic;
    c.message = error;
    return c;
  }
  for (const std::string& t : r.texts) {
    r.holders.push_back(parsed(t));
    r.parts.push_back(r.holders.back().get());
  }
  for (const TExprPtr& constraint : tmpl_.constraints) {
    std::string why;
    auto v = eval(*constraint, choices, r, why);
    if (!v || *v == 0) {
      c.reason = kReasonWhere;
      c.message = v ? "a `where` constraint does not hold" : why;
      return c;
    }
  }
  dtc::ScheduleInfo info = algorithm_->check_statements(r.parts);
  if (info.ok && info.lowering_matters && options_.lower_when_it_matters)
    info = algorithm_->check_statements(r.parts, true);
  if (!info.ok) {
    c.reason = info.reason();
    for (const dtc::Message& m : info.messages)
      if (m.severity == "error") {
        c.message = m.text;
        break;
      }
    return c;
  }
  std::string message;
  std::string rule = shape_rule(info, message);
  if (!rule.empty()) {
    c.reason = rule;
    c.message = message;
    return c;
  }
  c.ok = true;
  c.canonical = std::move(info.canonical);
  return c;
}

std::string shape_problem(const dtc::Algorithm& algorithm, const ShapeSizes& shape) {
  std::set<std::string> known, needed;
  std::map<std::string, std::string> tied; // label -> the label whose size it takes
  for (const dtc::FuncInfo& f : algorithm.funcs())
    for (const auto* labels : {&f.dims, &f.rvars})
      known.insert(labels->begin(), labels->end());
  const std::vector<dtc::CallSizes>& calls = algorithm.call_sizes();
  for (const dtc::CallSizes& call : calls)
    for (const std::string& l : call.labels) {
      known.insert(l); // also a label no Func has, as the `v` of a gather `In T: int(v)`
      if (call.tied.count(l))
        tied[l] = call.tied.at(l);
      else
        needed.insert(l);
    }
  if (calls.empty()) {
    // Nothing compiled (or no module to ask): every label of the compiled Funcs, or of all.
    bool any_compiled = false;
    for (const dtc::FuncInfo& f : algorithm.funcs())
      any_compiled |= f.compiled;
    for (const dtc::FuncInfo& f : algorithm.funcs())
      if (f.compiled || !any_compiled)
        for (const auto* labels : {&f.dims, &f.rvars})
          needed.insert(labels->begin(), labels->end());
  }
  auto list = [](const std::set<std::string>& s) {
    std::string out;
    for (const std::string& l : s)
      out += (out.empty() ? "" : ", ") + l;
    return out;
  };
  for (const auto& [label, size] : shape) {
    if (!known.count(label))
      return "the algorithm has no label `" + label + "` (its labels: " + list(known) + ")";
    if (size < 1)
      return "the size of `" + label + "` must be a whole number >= 1, not " + std::to_string(size);
  }
  std::string takes; // "; k takes y's size"
  for (const auto& [l, root] : tied)
    takes += "; " + l + " takes " + root + "'s size";
  for (const std::string& l : needed)
    if (!shape.count(l))
      return "the shape gives no size for `" + l + "` (it needs " + list(needed) + takes + ")";
  for (const auto& [l, root] : tied)
    if (shape.count(l) && shape.count(root) && shape.at(l) != shape.at(root))
      return "`" + l + "` takes the size of `" + root + "` (they index one dimension): give them " +
             "one size, not " + std::to_string(shape.at(l)) + " and " +
             std::to_string(shape.at(root));
  return "";
}

ShapeSizes complete_shape(const dtc::Algorithm& algorithm, ShapeSizes shape) {
  if (shape.empty() || !algorithm.ok()) return shape;
  for (const dtc::CallSizes& call : algorithm.call_sizes())
    for (const auto& [l, root] : call.tied)
      if (!shape.count(l) && shape.count(root)) shape[l] = shape.at(root);
  return shape;
}

std::uint64_t canonical_hash(const std::string& canonical) {
  // FNV-1a, 64-bit: stable across runs and platforms (std::hash is not).
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char ch : canonical) {
    h ^= ch;
    h *= 1099511628211ULL;
  }
  return h;
}

/// Threads evaluating chunks of points ahead of the consumer; chunk k holds the points
/// [begin + k * kChunk, ...). At most `ahead` chunks wait to be consumed.
struct Enumerator::Parallel {
  static constexpr std::uint64_t kChunk = 64;
  std::mutex mutex;
  std::condition_variable ready, room;
  std::map<std::uint64_t, std::vector<Candidate>> done;
  std::uint64_t next_chunk = 0, consumed = 0, chunks = 0, ahead = 0;
  bool stop = false;
  std::vector<std::thread> threads;
  std::vector<Candidate> current;
  std::size_t at = 0;
  std::uint64_t current_chunk = 0;
};

Enumerator::Enumerator(const Space& space, std::uint64_t begin, std::uint64_t end, unsigned threads)
    : space_(space), pos_(begin), end_(std::min(end, space.size())) {
  stats_.space_size = space.size();
  if (threads <= 1 || end_ <= pos_) return;
  parallel_ = std::make_unique<Parallel>();
  Parallel& p = *parallel_;
  p.chunks = (end_ - pos_ + Parallel::kChunk - 1) / Parallel::kChunk;
  p.ahead = 4 * threads;
  const std::uint64_t first = pos_, last = end_;
  for (unsigned t = 0; t < threads; ++t)
    p.threads.emplace_back([this, first, last] {
      Parallel& q = *parallel_;
      while (true) {
        std::uint64_t k;
        {
          std::unique_lock lock(q.mutex);
          q.room.wait(lock, [&] { return q.stop || q.next_chunk < q.consumed + q.ahead; });
          if (q.stop || q.next_chunk >= q.chunks) return;
          k = q.next_chunk++;
        }
        std::vector<Candidate> out;
        std::uint64_t lo = first + k * Parallel::kChunk;
        std::uint64_t hi = std::min(last, lo + Parallel::kChunk);
        out.reserve(hi - lo);
        for (std::uint64_t i = lo; i < hi; ++i)
          out.push_back(space_.evaluate(space_.decode(i), true));
        {
          std::lock_guard lock(q.mutex);
          q.done.emplace(k, std::move(out));
        }
        q.ready.notify_all();
      }
    });
}

Enumerator::~Enumerator() {
  if (!parallel_) return;
  {
    std::lock_guard lock(parallel_->mutex);
    parallel_->stop = true;
  }
  parallel_->room.notify_all();
  for (std::thread& t : parallel_->threads)
    t.join();
}

std::optional<Candidate> Enumerator::step() {
  if (!parallel_) {
    if (pos_ >= end_) return std::nullopt;
    return space_.evaluate(space_.decode(pos_++), true);
  }
  Parallel& p = *parallel_;
  if (p.at >= p.current.size()) {
    if (p.current_chunk >= p.chunks) return std::nullopt;
    std::unique_lock lock(p.mutex);
    p.ready.wait(lock, [&] { return p.done.count(p.current_chunk) > 0; });
    p.current = std::move(p.done[p.current_chunk]);
    p.done.erase(p.current_chunk);
    p.at = 0;
    ++p.current_chunk;
    p.consumed = p.current_chunk;
    lock.unlock();
    p.room.notify_all();
  }
  return std::move(p.current[p.at++]);
}

std::optional<Candidate> Enumerator::next(bool rejected) {
  if (stopped_) return std::nullopt;
  while (auto c = step()) {
    if (stop_ && ++steps_ % 64 == 0 && stop_()) {
      stopped_ = true;
      return std::nullopt;
    }
    if (!c->ok && c->reason == kReasonUnused) {
      ++stats_.unused;
      continue;
    }
    ++stats_.visited;
    if (!c->ok) {
      ++stats_.rejected[c->reason];
      if (rejected) return c;
      continue;
    }
    ++stats_.valid;
    if (!seen_.insert(canonical_hash(c->canonical)).second) {
      ++stats_.duplicates;
      continue;
    }
    ++stats_.distinct;
    return c;
  }
  return std::nullopt;
}

} // namespace dtx
