// The state the stages of lowering share: names and their types, addresses, cached values.
#include "lower/LowerState.h"

#include "lower/Names.h"

namespace dtc::lowering {

LowerState::LowerState(const ir::Program& p, const KernelPlan& plan, const PythonNames& names,
                       const ir::Symbol* f, DiagnosticEngine& d)
    : prog(p), py(names), fs(plan.of(f)), split(plan.split_of(f)),
      materialized(plan.materialized_of(f)), online(plan.online_of(f)), stored(plan.of(f).stored),
      func(f), def(p.def(f)), diags(d) {}

kir::Type int_type(kir::Scalar s) {
  kir::Type t;
  t.scalar = s;
  return t;
}

kir::LaunchArg launch_arg(kir::LaunchArg::Kind kind, const std::string& name, size_t axis,
                          size_t rank, long long least) {
  kir::LaunchArg a;
  a.kind = kind;
  a.name = name;
  a.axis = axis;
  a.rank = rank;
  a.least = least;
  return a;
}

// ---- names and their types ------------------------------------------------------------------

Value LowerState::ref(const std::string& name) const {
  auto it = types.find(name);
  DTC_ASSERT(it != types.end(), "kernel name " + name + " read before it is bound");
  return kir::var(name, it->second);
}

Value LowerState::let(Body& body, const std::string& name, Value value) {
  used.insert(name);
  types[name] = value->type;
  body.push_back(kir::Stmt::assign(name, std::move(value)));
  return ref(name);
}

std::string LowerState::fresh(const std::string& base) {
  std::string name = base;
  for (int i = 2; used.count(name) || is_param(name); ++i)
    name = base + "_" + std::to_string(i);
  used.insert(name);
  return name;
}

bool LowerState::is_param(const std::string& name) const {
  for (const kir::Param& p : kernel.params)
    if (p.name == name) return true;
  return name == py(func) || name == "pid";
}

void LowerState::add_param(const std::string& name, kir::LaunchArg launch, kir::Type type,
                           bool constexpr_) {
  kernel.params.push_back({name, constexpr_, type});
  types[name] = type;
  launch.param = name;
  kernel.launch.push_back(std::move(launch));
}

Value LowerState::index(Value v) {
  if (fs.index == "int64") return kir::cast(std::move(v), kir::Scalar::I64);
  if (!types.count(kir::kIndexParam))
    add_param(kir::kIndexParam, launch_arg(kir::LaunchArg::Kind::Index), int_type(),
              /*constexpr_=*/true);
  return kir::cast(std::move(v), kir::Scalar::Index);
}

Value LowerState::extent_value(const kir::Extent& x) const {
  return x.param.empty() ? kir::int_imm(x.n) : ref(x.param);
}

Value LowerState::even_mask(Label l, Value in_range, long long modulus) {
  // Every tile is full whatever the size (a block of 1): the mask stays as it is, since the
  // kernel verifier wants every tensor load masked and it costs a scalar comparison.
  if (modulus == 1) return in_range;
  auto [it, added] = evens.try_emplace({l, modulus});
  if (added) {
    it->second = fresh(py(l) + "_EVEN");
    kir::LaunchArg a = launch_arg(kir::LaunchArg::Kind::Even, py(l), 0, 0, tile_least(l));
    a.modulus = modulus;
    add_param(it->second, a, int_type(kir::Scalar::I1), /*constexpr_=*/true);
  }
  return kir::binary(kir::BinOp::Or, std::move(in_range), ref(it->second));
}

// ---- tensor descriptors (tma) ------------------------------------------------------------------

// Fresh names: a user's `A_TMA` (an input, a scalar, a Func's value) keeps its own.
std::string LowerState::tma_flag(const ir::Symbol* t) {
  auto [it, added] = tma_flags.try_emplace(t);
  if (added) {
    it->second = fresh(py(t) + "_TMA");
    add_param(it->second, launch_arg(kir::LaunchArg::Kind::Tma, py(t)), int_type(kir::Scalar::I1),
              /*constexpr_=*/true);
  }
  return it->second;
}

Value LowerState::tile_origin(Label l) const {
  const Value& origin = bind.at(l).back().origin;
  return origin ? kir::cast(origin, kir::Scalar::I32) : kir::int_imm(0);
}

void LowerState::bound_box(const std::string& flag, const std::string& tile_param) {
  const kir::LaunchArg* tile = nullptr;
  for (const kir::LaunchArg& a : kernel.launch)
    if (a.param == tile_param && a.kind == kir::LaunchArg::Kind::Tile) tile = &a;
  DTC_ASSERT(tile, "descriptor block of width " + tile_param + ", not a tile parameter");
  std::pair<std::string, long long> box{tile->name, tile->least};
  for (kir::LaunchArg& a : kernel.launch)
    if (a.param == flag && std::find(a.boxes.begin(), a.boxes.end(), box) == a.boxes.end())
      a.boxes.push_back(box);
}

std::string LowerState::half_flag(const ir::Symbol* t) {
  auto [it, added] = half_flags.try_emplace(t);
  if (added) {
    it->second = fresh(py(t) + "_HALF");
    add_param(it->second, launch_arg(kir::LaunchArg::Kind::Half, py(t)), int_type(kir::Scalar::I1),
              /*constexpr_=*/true);
  }
  return it->second;
}

std::string LowerState::warp_specialize_flag() {
  if (ws_flag.empty()) {
    ws_flag = fresh("WARP_SPECIALIZE");
    kir::LaunchArg arg = launch_arg(kir::LaunchArg::Kind::WarpSpecialize, "");
    add_param(ws_flag, std::move(arg), int_type(kir::Scalar::I1), /*constexpr_=*/true);
  }
  return ws_flag;
}

Value LowerState::descriptor(const ir::Symbol* t, const ir::Labels& dims, const kir::Shape& block) {
  auto key = std::make_pair(t, kir::to_string(block));
  if (auto it = descriptors.find(key); it != descriptors.end()) return it->second;
  std::string name = fresh(py(t) + "_desc");
  std::vector<Value> sizes, strides;
  for (size_t i = 0; i < dims.size(); ++i) {
    sizes.push_back(ref(py.size(dims[i])));
    if (i + 1 < dims.size()) strides.push_back(stride_var(t, i));
  }
  Value desc = kir::make_desc(ptr_var(t), std::move(sizes), std::move(strides), block, tma_flag(t));
  // At the kernel's start: it depends on parameters only.
  types[name] = desc->type;
  kernel.body.insert(kernel.body.begin(), kir::Stmt::assign(name, desc));
  return descriptors[key] = ref(name);
}

// ---- tensors and addresses --------------------------------------------------------------------

bool LowerState::materialized_here(const ir::Symbol* t) const {
  for (const auto& [f, at] : materialized)
    if (f == t) return true;
  return false;
}

std::string LowerState::tensor_base(const ir::Symbol* t) const {
  return materialized_here(t) ? py(t) + "_fuse" : py(t);
}

Value LowerState::stride_var(const ir::Symbol* t, size_t i) const {
  return ref(tensor_base(t) + "_stride" + std::to_string(i));
}

Value LowerState::offset_expr(const ir::Symbol* t, const ir::Labels& index) {
  Value s;
  for (size_t i = 0; i < index.size(); ++i) {
    Value term = kir::mul(bind[index[i]].back().idx, stride_var(t, i));
    s = s ? kir::add(s, term) : term;
  }
  return s;
}

Value LowerState::mask_of(const ir::Labels& of) {
  Value m;
  for (Label l : of)
    m = kir::and_(m, bind[l].back().mask);
  return m;
}

void LowerState::for_each_value(ir::IRVisitor& v) const {
  def.value->accept(v);
  for (const auto& [f, at] : materialized)
    prog.def(f).value->accept(v);
  for (const ir::Symbol* g : stored)
    prog.def(g).value->accept(v);
}

// ---- computed values, reused by key -----------------------------------------------------------

std::string LowerState::index_key(Label l) {
  return kir::print(*bind[l].back().idx);
}

std::string LowerState::reduction_key(const ir::Expr& e) {
  std::string key = "reduction:" + ir::to_dt(e);
  for (Label l : e.dims)
    key += "," + l->name + "=" + index_key(l);
  return key;
}

std::optional<Value> LowerState::cached(const std::string& key) const {
  for (auto it = cache.rbegin(); it != cache.rend(); ++it)
    if (auto hit = it->find(key); hit != it->end()) return hit->second;
  return std::nullopt;
}

} // namespace dtc::lowering
