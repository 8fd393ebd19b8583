#include "lower/SplitReductions.h"

#include "lower/LowerFunc.h"
#include "lower/Names.h"

#include <set>

namespace dtc {

static ir::Symbol* add_symbol(ir::Program& program, PythonNames& py, std::string base,
                              ir::SymbolKind kind, Loc loc) {
  while (program.find(base) || !py.available(base, kind))
    base += "_";
  ir::Symbol s;
  s.name = base;
  s.kind = kind;
  s.loc = loc;
  s.order = static_cast<int>(program.symbols.size());
  program.symbols.push_back(s);
  ir::Symbol* sym = &program.symbols.back();
  program.by_name[base] = sym;
  py.add(sym);
  return sym;
}

void split_reductions(ir::Program& program, KernelPlan& plan, PythonNames& py,
                      DiagnosticEngine& diags) {
  Schedule& schedule = plan.schedule;
  std::vector<const ir::Symbol*> funcs;
  for (const auto& [f, fs] : schedule.funcs)
    funcs.push_back(f);
  for (const ir::Symbol* f : funcs) {
    if (!program.funcs.count(f)) continue;
    FuncSchedule& fs = schedule.of(f);
    ir::FuncDef& def = program.funcs.at(f);
    ir::Labels blocked;
    for (const auto& [l, size] : fs.block)
      if (!ir::contains(def.dims, l)) blocked.push_back(l);
    if (blocked.empty()) continue;
    Loc loc = fs.where.count("block") ? fs.where.at("block") : def.loc;
    if (blocked.size() > 1) {
      diags.error("split-two-reductions", loc,
                  "in `" + f->name +
                      ".block(...)`: only one reduction dimension of a Func "
                      "can be blocked; block `" +
                      blocked[0]->name + "` or `" + blocked[1]->name + "`");
      continue;
    }
    ir::Label k = blocked[0];
    const ir::Reduce* reduce = def.value->as<ir::Reduce>();
    const ir::Dot* dot = def.value->as<ir::Dot>();
    ir::Label top = reduce ? reduce->rvar : dot ? dot->rvar : nullptr;
    if (top != k) {
      diags.error("split-not-one-reduction", loc,
                  "in `" + f->name + ".block(...)`: blocking the reduction dimension `" + k->name +
                      "` splits the reduction over program instances, which needs `" + f->name +
                      "` to be defined as one reduction over `" + k->name +
                      "`; move the rest of the expression into another Func");
      continue;
    }
    ir::ReduceOp op = reduce ? reduce->op : ir::ReduceOp::Sum;
    long long block = fs.block.at(k);
    if (fs.atomic && *fs.atomic == k) {
      plan.split[f] = SplitReduction{k, block, nullptr, op};
      continue;
    }
    // Partial results: f_partial[dims..., k_parts] computed with f's schedule.
    ir::Symbol* parts = add_symbol(program, py, py(k) + "_parts", ir::SymbolKind::RVar, k->loc);
    ir::Symbol* partial = add_symbol(program, py, py(f) + "_partial", ir::SymbolKind::Func, f->loc);
    program.derived_sizes[parts] = {k, block};
    ir::FuncDef pdef = def;
    pdef.symbol = partial;
    pdef.dims.push_back(parts);
    program.funcs[partial] = pdef;
    FuncSchedule ps = fs;
    ps.func = partial;
    ps.fuse_at.reset();
    schedule.funcs[partial] = ps;
    plan.split[partial] = SplitReduction{k, block, parts, op};
    if (plan.materialized.count(f)) // computed by the partial kernel now
      plan.materialized[partial] = plan.materialized.at(f);

    // f reduces the partial results; the combining op of a dot's partial sums is a sum.
    ir::Labels index = pdef.dims;
    auto access = std::make_shared<ir::Access>(def.loc, partial, index);
    def.value = std::make_shared<ir::Reduce>(def.loc, op, access, parts, def.dims);
    def.deps = {partial};
    plan.materialized.erase(f);
    fs.block.erase(k);
    fs.tensor.erase(k);
    // Partial results are reduced kPartialsPerStep at a time: any number of them fits a tensor.
    // With the output's tile that must stay within Triton's 2^20 elements per tensor.
    // A whole unblocked dimension's width is known only at run time: then one partial at a time.
    long long tile = 1;
    for (ir::Label l : def.dims) {
      auto b = fs.block_of(l);
      long long t = fs.tensor_of(l);
      if (t == 0 && !b)
        tile = 1LL << 20;
      else
        tile *= t == 0 ? next_power_of_two(*b) : std::max(1LL, t);
    }
    long long width = kPartialsPerStep;
    while (width > 1 && tile * width > (1LL << 20))
      width /= 2;
    fs.tensor[parts] = width;
    if (fs.map) {
      std::vector<MapLevel> kept;
      std::set<std::string> dropped;
      for (const MapLevel& lv : *fs.map) {
        if (lv.dim == k) {
          dropped.insert(lv.name);
          continue;
        }
        kept.push_back(lv);
      }
      fs.map = kept;
    }
  }
}

} // namespace dtc
