#include "kir/OnlinePartitions.h"

#include "kir/WarpPartitions.h"

#include <algorithm>

namespace dtc::kir {
namespace {

using Kind = Form::Kind;
using Of = Form::Of;

/// The product in `e` (through reshapes), or null.
const Expr* product_of(const Expr& e) {
  const Expr* x = &e;
  while (x->kind == ExprKind::Reshape)
    x = x->args[0].get();
  return x->kind == ExprKind::Dot ? x : nullptr;
}

int count_products(const Expr& e) {
  int n = e.kind == ExprKind::Dot ? 1 : 0;
  for (const ExprPtr& a : e.args)
    n += count_products(*a);
  return n;
}

/// The statements the warp-specialized loops are among: the kernel's, or with persistent
/// programs those of the loop over blocks, which `blocks` is then set to.
const std::vector<StmtPtr>& loop_level(const Kernel& kernel, const Stmt** blocks) {
  if (kernel.persistent)
    for (const StmtPtr& s : kernel.body)
      if (s->kind == StmtKind::For && !s->warp_specialize)
        for (const StmtPtr& t : s->body)
          if (t->kind == StmtKind::For && t->warp_specialize) {
            if (blocks) *blocks = s.get();
            return s->body;
          }
  return kernel.body;
}

std::vector<const Stmt*> specialized_loops(const Kernel& kernel, const Stmt** blocks = nullptr) {
  std::vector<const Stmt*> loops;
  for (const StmtPtr& s : loop_level(kernel, blocks))
    if (s->kind == StmtKind::For && s->warp_specialize) loops.push_back(s.get());
  return loops;
}

/// The assignment in `stmts` binding `name` to a descriptor load, or null.
const Stmt* desc_load(const std::vector<const Stmt*>& stmts, const std::string& name) {
  for (const Stmt* s : stmts)
    if (s->kind == StmtKind::Assign && s->name == name && s->value->kind == ExprKind::DescLoad)
      return s;
  return nullptr;
}

/// A descriptor's block is [1, ..., 1, rows, cols]: the tile is its last two dimensions.
bool two_dimensional_block(const Stmt& load) {
  const Shape& block = load.value->args[0]->type.shape;
  if (block.size() < 2) return false;
  for (size_t i = 0; i + 2 < block.size(); ++i)
    if (!block[i].is_one()) return false;
  return true;
}

Form row_form(Of of) {
  return {Kind::Rows, of};
}

} // namespace

std::optional<Form> combine_forms(const OnlinePartitions& p, const std::vector<Form>& operands) {
  std::optional<Form> tile, rows, cols;
  for (Form f : operands) {
    f = p.normal(f);
    if (f.kind == Kind::Scalar) continue;
    std::optional<Form>& slot = f.kind == Kind::Tile ? tile : f.kind == Kind::Rows ? rows : cols;
    if (!slot) slot = f;
    if (f.kind != Kind::Rows && slot->of != f.of) return std::nullopt; // two column axes
  }
  if (tile) {
    if (cols && cols->of != tile->of) return std::nullopt;
    return tile;
  }
  if (rows && cols) return Form{Kind::Tile, cols->of};
  if (rows) return rows;
  if (cols) return cols;
  return Form{};
}

bool has_online_loop(const Kernel& kernel) {
  std::vector<const Stmt*> loops = specialized_loops(kernel);
  for (const Stmt* loop : loops) {
    int products = 0;
    for (const StmtPtr& s : loop->body)
      if (s->kind == StmtKind::Assign) products += count_products(*s->value);
    if (products != 2) return false;
  }
  return !loops.empty();
}

static std::optional<Form> shape_form(const OnlinePartitions& p, const Shape& shape);

std::optional<Form> form_of_shape(const OnlinePartitions& p, const Shape& shape) {
  std::optional<Form> f = shape_form(p, shape);
  if (f) f = p.normal(*f);
  return f;
}

static std::optional<Form> shape_form(const OnlinePartitions& p, const Shape& shape) {
  if (shape.empty()) return Form{};
  auto is = [](const Extent& x, const Extent& y) { return x == y; };
  if (shape.size() == 1) {
    if (is(shape[0], p.rows)) return row_form(Of::Scores);
    if (is(shape[0], p.score_cols)) return Form{Kind::Cols, Of::Scores};
    if (is(shape[0], p.out_cols)) return Form{Kind::Cols, Of::Output};
    return shape[0].is_one() ? std::optional<Form>(Form{}) : std::nullopt;
  }
  if (shape.size() == 2) {
    // A 2-D value (the products' operands and results): [rows or 1, columns or 1].
    const bool r = is(shape[0], p.rows), c1 = shape[1].is_one();
    if (!r && !shape[0].is_one()) return std::nullopt;
    if (c1) return r ? std::optional<Form>(row_form(Of::Scores)) : std::optional<Form>(Form{});
    Of of;
    if (is(shape[1], p.score_cols))
      of = Of::Scores;
    else if (is(shape[1], p.out_cols))
      of = Of::Output;
    else
      return std::nullopt;
    return Form{r ? Kind::Tile : Kind::Cols, of};
  }
  if (static_cast<int>(shape.size()) != p.rank_of_values) return std::nullopt;
  bool row = false, score = false, out = false;
  for (int i = 0; i < static_cast<int>(shape.size()); ++i) {
    if (shape[i].is_one()) continue;
    if (i == p.row_axis)
      row = true;
    else if (i == p.score_axis)
      score = true;
    else if (i == p.out_axis)
      out = true;
    else
      return std::nullopt;
  }
  if (score && out) return std::nullopt;
  if (!score && !out) return row ? std::optional<Form>(row_form(Of::Scores)) : Form{};
  const Of of = score ? Of::Scores : Of::Output;
  return Form{row ? Kind::Tile : Kind::Cols, of};
}

std::optional<Form> online_form(const OnlinePartitions& p, const Expr& e,
                                const std::map<std::string, Form>& names) {
  std::optional<Form> shaped = form_of_shape(p, e.type.shape);
  if (!shaped) return std::nullopt;
  auto operands = [&](size_t from) -> std::optional<Form> {
    std::vector<Form> forms;
    for (size_t i = from; i < e.args.size(); ++i) {
      std::optional<Form> f = online_form(p, *e.args[i], names);
      if (!f) return std::nullopt;
      forms.push_back(*f);
    }
    return combine_forms(p, forms);
  };
  std::optional<Form> f;
  switch (e.kind) {
  case ExprKind::Var: {
    auto it = names.find(e.name);
    if (it != names.end()) return it->second;
    return e.type.shape.empty() ? std::optional<Form>(Form{}) : std::nullopt; // a parameter
  }
  case ExprKind::Int:
  case ExprKind::Float:
  case ExprKind::ProgramId:
  case ExprKind::NumPrograms:
    return Form{};
  case ExprKind::Arange:
    return shaped->kind == Kind::Rows || shaped->kind == Kind::Cols ? shaped : std::nullopt;
  case ExprKind::Expand: {
    const Expr* a = e.args[0].get();
    while (a->kind == ExprKind::Cast)
      a = a->args[0].get();
    if (a->kind != ExprKind::Arange) return std::nullopt;
    return shaped;
  }
  case ExprKind::Full:
    return shaped->kind == Kind::Rows || shaped->kind == Kind::Tile || shaped->kind == Kind::Scalar
               ? shaped
               : std::nullopt;
  case ExprKind::Reshape:
    f = online_form(p, *e.args[0], names);
    if (!f || f->kind != shaped->kind) return std::nullopt;
    return f;
  case ExprKind::Reduce: {
    f = online_form(p, *e.args[0], names);
    const bool along_keys = e.value_int == (e.args[0]->type.shape.size() == 2 ? 1 : p.score_axis);
    if (!f || f->kind != Kind::Tile || f->of != Of::Scores || !along_keys ||
        (e.reduce != ReduceOp::Max && e.reduce != ReduceOp::Sum))
      return std::nullopt;
    return row_form(Of::Scores);
  }
  case ExprKind::Neg:
  case ExprKind::Binary:
  case ExprKind::Call:
  case ExprKind::Select:
  case ExprKind::Cast:
    f = operands(0);
    break;
  default: // loads, products, descriptors: not the consumer's
    return std::nullopt;
  }
  if (!f || f->kind != shaped->kind) return std::nullopt;
  return f;
}

namespace {

/// The parts of online loop `l.loop`: its loads, scores and update; false with `why`.
bool split_loop(OnlinePartitions& p, OnlinePartitions::Loop& l, std::vector<const Stmt*>& body,
                std::string& why) {
  for (const StmtPtr& s : l.loop->body) {
    if (s->kind == StmtKind::Comment) continue;
    if (s->kind != StmtKind::Assign) {
      why = "the online loop does more than compute values";
      return false;
    }
    body.push_back(s.get());
    const Expr* d = product_of(*s->value);
    if (!d) continue;
    if (d->args.size() == 2 && !l.scores)
      l.scores = s.get();
    else if (d->args.size() == 3 && l.scores && !l.update)
      l.update = s.get();
    else {
      why = "the online loop's products are not the scores and then the accumulator's update";
      return false;
    }
  }
  if (!l.scores || !l.update || l.update->value->kind != ExprKind::Dot) {
    why = "the online loop does not compute scores and then update an accumulator";
    return false;
  }
  const Expr& qk = *product_of(*l.scores->value);
  const Expr& pv = *l.update->value;
  const Stmt* q =
      qk.args[0]->kind == ExprKind::Var ? desc_load(p.before, qk.args[0]->name) : nullptr;
  if (!q || (p.q && p.q != q) || qk.args[1]->kind != ExprKind::Var ||
      !(l.k = desc_load(body, qk.args[1]->name))) {
    why = "the scores are not a product of a tile loaded before the loop and one loaded in it, "
          "each through a tensor descriptor";
    return false;
  }
  p.q = q;
  if (!p.acc.empty() && p.acc != l.update->name) {
    why = "the online loops update different accumulators";
    return false;
  }
  p.acc = l.update->name;
  if (pv.args[1]->kind == ExprKind::Var) {
    l.v_read = pv.args[1]->name;
    l.v = desc_load(body, l.v_read);
    for (const Stmt* s : body)
      if (!l.v && s->name == l.v_read && s->value->kind == ExprKind::Cast &&
          s->value->args[0]->kind == ExprKind::Var)
        l.v = desc_load(body, s->value->args[0]->name);
  }
  if (!l.v || p.q->value->value_int) {
    why = "the accumulator's update does not read a tile loaded through a tensor descriptor";
    return false;
  }
  for (const Stmt* load : {p.q, l.k, l.v})
    if (!two_dimensional_block(*load)) {
      why = "`" + load->name + "` is read through a descriptor whose block is not one tile";
      return false;
    }
  // One ring for every loop: their tiles alike.
  const OnlinePartitions::Loop& first = p.loops.front();
  if (&first != &l && (first.k->value->args[0]->type.shape != l.k->value->args[0]->type.shape ||
                       first.v->value->args[0]->type.shape != l.v->value->args[0]->type.shape ||
                       first.k->value->value_int != l.k->value->value_int ||
                       first.v->value->value_int != l.v->value->value_int ||
                       first.scores->value->type.shape != l.scores->value->type.shape)) {
    why = "the online loops read tiles of different shapes";
    return false;
  }
  // The copies' offsets read only the loop's variable and names bound before it.
  std::set<std::string> bound_in_loop, offsets;
  for (const Stmt* s : body)
    bound_in_loop.insert(s->name);
  for (const Stmt* load : {l.k, l.v})
    for (size_t i = 1; i + 1 < load->value->args.size(); ++i)
      free_vars(*load->value->args[i], offsets);
  for (const std::string& name : offsets)
    if (bound_in_loop.count(name)) {
      why = "`" + name + "`, bound in the online loop, places a key or value tile";
      return false;
    }
  return true;
}

} // namespace

std::optional<OnlinePartitions> online_partitions(const Kernel& kernel, std::string& why) {
  OnlinePartitions p;
  std::vector<const Stmt*> loops = specialized_loops(kernel, &p.blocks);
  if (loops.empty()) {
    why = "the online loop runs inside another loop (over blocks of the output's columns), and "
          "the Gluon form takes one at the kernel's top level or in a persistent grid's loop";
    return std::nullopt;
  }
  if (!has_online_loop(kernel)) {
    why = "a warp-specialized loop is not an online loop of two products";
    return std::nullopt;
  }
  if (p.blocks) {
    bool past = false;
    for (const StmtPtr& s : kernel.body) {
      if (s.get() == p.blocks) {
        past = true;
      } else if (!past) {
        p.outer.push_back(s.get());
      } else if (s->kind != StmtKind::Comment) {
        why = "the kernel computes more after its loop over output blocks";
        return std::nullopt;
      }
    }
  }
  size_t seen = 0;
  for (const StmtPtr& s : p.blocks ? p.blocks->body : kernel.body) {
    if (seen < loops.size() && s.get() == loops[seen]) {
      ++seen;
      continue;
    }
    if (seen > 0 && seen < loops.size()) {
      why = "the kernel computes between its online loops";
      return std::nullopt;
    }
    (seen ? p.after : p.before).push_back(s.get());
  }
  for (const Stmt* s : p.after)
    if (s->kind == StmtKind::For || s->kind == StmtKind::Barrier) {
      why = "the kernel loops again after its online loops";
      return std::nullopt;
    }
  std::vector<std::vector<const Stmt*>> bodies(loops.size());
  for (size_t i = 0; i < loops.size(); ++i) {
    p.loops.push_back({});
    p.loops.back().loop = loops[i];
    if (!split_loop(p, p.loops.back(), bodies[i], why)) return std::nullopt;
  }
  // The values' axes: the scores' two (rows, keys), and the stored output's other one.
  const Shape& scores = p.loops.front().scores->value->type.shape;
  p.rank_of_values = static_cast<int>(scores.size());
  if (p.rank_of_values < 3) {
    why = "the scores are not a tile of the kernel's values over every label";
    return std::nullopt;
  }
  for (int i = 0; i < p.rank_of_values; ++i)
    if (!scores[i].is_one()) (p.row_axis < 0 ? p.row_axis : p.score_axis) = i;
  // The output's columns: the other axis of the tiles stored after the loops (a log-sum-exp
  // stored beside the output is a row vector).
  bool stored = false;
  for (const Stmt* s : p.after) {
    if (s->kind != StmtKind::Store) continue;
    if (s->atomic != Atomic::None ||
        static_cast<int>(s->value->type.shape.size()) != p.rank_of_values) {
      why = "the kernel stores after its online loop other than plain tiles of its values";
      return std::nullopt;
    }
    const Shape& out = s->value->type.shape;
    for (int i = 0; i < static_cast<int>(out.size()); ++i)
      if (!out[i].is_one() && i != p.row_axis) {
        if ((p.out_axis >= 0 && p.out_axis != i) || i == p.score_axis) {
          why = "the stored output is not a tile over the scores' rows and one other axis";
          return std::nullopt;
        }
        p.out_axis = i;
      }
    stored = true;
  }
  if (!stored || p.out_axis < 0 || p.score_axis < 0) {
    why = "the kernel does not store an output tile over the scores' rows after its online loop";
    return std::nullopt;
  }
  const Expr& pv = *p.loops.front().update->value;
  for (const OnlinePartitions::Loop& l : p.loops)
    if (l.update->value->args[0]->type.scalar != Scalar::Elem) {
      // precision(tf32x3) or (ieee) keeps them in float32 for tl.dot's own algorithm.
      why = "the probabilities are multiplied by the values in float32 (the product's "
            "precision), and the warpgroup instructions take them from registers only in 16 "
            "bits";
      return std::nullopt;
    }
  p.rows = scores[p.row_axis];
  p.score_cols = scores[p.score_axis];
  p.out_cols = pv.type.shape.size() == 2 ? pv.type.shape[1] : Extent{};
  const int consumers = std::max(1, kernel.num_warps / 4);
  if (!p.rows.param.empty() || !p.score_cols.param.empty() || p.rows.n % (64 * consumers)) {
    why = "each of the " + std::to_string(consumers) +
          " consumer warpgroups takes a share of the block's rows that is not a multiple of 64 "
          "(a warpgroup's product), or the rows or the key step are not fixed";
    return std::nullopt;
  }
  // The consumer: in each loop the update and every name carried by the loops or read after
  // them, and what they read, less the loads.
  std::set<std::string> carried = {p.acc}, needed;
  for (const Stmt* s : p.after)
    reads(*s, carried);
  for (const std::vector<const Stmt*>* stmts : {&p.outer, &p.before})
    for (const Stmt* s : *stmts)
      if (s->kind == StmtKind::Assign) carried.insert(s->name);
  for (size_t i = 0; i < loops.size(); ++i) {
    OnlinePartitions::Loop& l = p.loops[i];
    std::set<std::string> wanted = {p.acc};
    for (const Stmt* s : bodies[i])
      if (carried.count(s->name)) wanted.insert(s->name);
    std::vector<const Stmt*> rest;
    for (const Stmt* s : bodies[i])
      if (s != l.k && s != l.v && s->name != l.v_read) rest.push_back(s);
    l.consumer = slice(rest, wanted);
    std::set<std::string> update_reads;
    reads(*l.update, update_reads);
    // Issued in the next step after the statements before its scores and with those after the
    // update already run: neither may bind what the update reads.
    bool between = false;
    l.pipelined = kernel.num_stages >= 2;
    for (const Stmt* s : l.consumer) {
      if (s == l.scores || s == l.update) {
        between = s == l.scores;
        continue;
      }
      std::set<std::string> read;
      reads(*s, read);
      if (read.count(p.acc) || s->name == p.acc || (!between && update_reads.count(s->name)))
        l.pipelined = false;
    }
    for (const Stmt* s : l.consumer)
      if (s != l.scores && s != l.update) reads(*s, needed);
    reads(*l.update, needed); // the accumulator it rescales, the probabilities
    for (const ExprPtr* bound : l.loop->operands())
      free_vars(**bound, needed);
  }
  for (const Stmt* s : p.after)
    reads(*s, needed);
  needed.erase(p.q->name);
  for (const OnlinePartitions::Loop& l : p.loops) {
    needed.erase(l.k->name);
    needed.erase(l.v_read);
    for (const Stmt* s : l.consumer) // bound in the loops: not wanted from before them
      if (!carried.count(s->name)) needed.erase(s->name);
  }
  std::vector<const Stmt*> before;
  for (const Stmt* s : p.before)
    if (s != p.q) before.push_back(s);
  p.consumer_before = slice(before, needed);
  // With persistent programs, what they and the loop over blocks read from before it.
  if (p.blocks)
    for (const ExprPtr* bound : p.blocks->operands())
      free_vars(**bound, needed);
  p.consumer_outer = slice(p.outer, needed);
  std::set<std::string> producer_needs;
  for (const Stmt* s : p.before)
    if (s == p.q)
      for (size_t i = 0; i + 1 < s->value->args.size(); ++i)
        free_vars(*s->value->args[i], producer_needs);
  for (const OnlinePartitions::Loop& l : p.loops) {
    for (const Stmt* load : {l.k, l.v})
      for (size_t i = 0; i + 1 < load->value->args.size(); ++i)
        free_vars(*load->value->args[i], producer_needs);
    for (const ExprPtr* bound : l.loop->operands())
      free_vars(**bound, producer_needs);
  }
  p.producer_before = slice(before, producer_needs);
  if (p.blocks)
    for (const ExprPtr* bound : p.blocks->operands())
      free_vars(**bound, producer_needs);
  p.producer_outer = slice(p.outer, producer_needs);
  // Every value the consumer computes has a form.
  std::map<std::string, Form> names;
  auto give = [&](const Stmt& s, std::optional<Form> f) {
    if (!f) {
      why = "the consumer cannot compute `" + s.name + "` (" + to_string(s.value->type) +
            ") in the products' layouts";
      return false;
    }
    names.emplace(s.name, *f); // a name bound again keeps its first form (converted to it)
    return true;
  };
  std::vector<const Stmt*> consumer_first = p.consumer_outer;
  consumer_first.insert(consumer_first.end(), p.consumer_before.begin(), p.consumer_before.end());
  for (const Stmt* s : consumer_first) {
    if (s->kind != StmtKind::Assign) continue;
    if (s->value->kind == ExprKind::MakeDesc) { // the output's descriptor: no layout
      names.emplace(s->name, Form{});
      continue;
    }
    std::optional<Form> f = online_form(p, *s->value, names);
    if (s->name == p.acc && f) f = p.normal({Kind::Tile, Of::Output}); // its zeros
    if (!give(*s, f)) return std::nullopt;
  }
  for (int pass = 0; pass < 2; ++pass) // loop-carried names: their first binding's form
    for (const OnlinePartitions::Loop& l : p.loops)
      for (const Stmt* s : l.consumer) {
        const Expr& update = *l.update->value;
        const Form score_tile = p.normal({Kind::Tile, Of::Scores});
        const Form output = p.normal({Kind::Tile, Of::Output});
        std::optional<Form> f = s == l.scores   ? score_tile
                                : s == l.update ? output
                                                : online_form(p, *s->value, names);
        if (s == l.update && (online_form(p, *update.args[2], names) != output ||
                              online_form(p, *update.args[0], names) != score_tile))
          f.reset();
        if (!give(*s, f)) return std::nullopt;
      }
  for (const Stmt* s : p.after) {
    if (s->kind == StmtKind::Assign && !give(*s, online_form(p, *s->value, names)))
      return std::nullopt;
    if (s->kind == StmtKind::Store) // a descriptor's parts: printed from the value stored
      for (const ExprPtr* e : {&s->ptr, &s->value, &s->mask})
        if (*e && !online_form(p, **e, names)) {
          why = "the consumer cannot store the output in the products' layouts";
          return std::nullopt;
        }
  }
  return p;
}

} // namespace dtc::kir
