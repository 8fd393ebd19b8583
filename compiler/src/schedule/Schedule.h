#pragma once
// The schedule of a DT program: for each Func, the merged effect of its scheduling statements.
// Each primitive lives in its own file (Block.cpp, Tensorize.cpp, ...) with its checks, how it
// merges into a FuncSchedule, and how it prints in canonical form, so every schedule replays and
// prints (see docs/language.md and the schedule-template spec, section 1).
// Lowering and code generation read it; they never see the AST (the statements are applied by
// ApplySchedule.h) and never write it (what lowering decides goes to lower/KernelPlan.h).
#include "ir/IR.h"

#include <map>
#include <optional>

namespace dtc {

/// One level of the `map` loop nest over program instances.
struct MapLevel {
  std::string name;            // the dimension label's name, or a split's ID
  ir::Label dim;               // the dimension this level walks (for an ID: the split dimension)
  long long factor = 0;        // for `VAR:ID/FACTOR`: FACTOR; 0 when not split here
  std::string split_id;        // for `VAR:ID/FACTOR`: ID
  bool is_split_inner = false; // this level is an ID introduced by an earlier split
  Loc loc;
};

struct FuseAt {
  const ir::Symbol* into = nullptr; // the consumer Func
  ir::Label at = nullptr;           // the loop level
  Loc loc;
};

/// g.store_in(f): f's kernel also computes g and stores it; f's wrapper returns it too.
struct StoreIn {
  const ir::Symbol* into = nullptr;
  Loc loc;
};

struct FuncSchedule {
  const ir::Symbol* func = nullptr;
  std::map<ir::Label, long long> block;  // dimension -> block size
  std::map<ir::Label, long long> tensor; // dimension -> tensor size (0: the whole block)
  std::optional<std::vector<MapLevel>> map;
  std::optional<FuseAt> fuse_at;
  std::optional<StoreIn> store_in;       // this Func is stored by another's kernel
  std::vector<const ir::Symbol*> stored; // Funcs this one's kernel stores too, in statement order
  std::optional<ir::Label> online;       // online(l): the reductions over l in one pass
  std::optional<int> num_warps;
  std::optional<int> num_stages;
  std::optional<ir::Label> atomic;       // atomic(k): combine a blocked reduction atomically
  std::optional<std::string> precision;  // precision(tf32|tf32x3|ieee) of float32 tl.dot
  std::optional<std::string> relayout;   // relayout(auto|copy|none) of float32 tl.dot inputs
  std::optional<std::string> index;      // index(auto|int64): the index arithmetic's width
  std::optional<std::string> persistent; // persistent(none|interleaved|blocked) programs
  bool flatten = false;                  // persistent(..., flatten): blocks, k in one loop
  std::vector<const ir::Symbol*> tma;    // inputs whose tl.dot tiles load via descriptors
                                         // (and the Func, for its store through one)
  std::optional<std::pair<ir::Label, int>> subtile; // subtile(n:P): the store in P parts
  std::optional<ir::Label> warp_specialize;         // warp_specialize(k): k's product loop
  /// warp_specialize(k, m:R): on Hopper the epilogue runs R rows of the tile at a time, staged
  /// through shared memory (codegen/GluonPrinter.cpp); 0: on the whole tile in registers.
  std::optional<std::pair<ir::Label, int>> epilogue_rows;
  std::map<std::string, Loc> where;     // primitive name -> location of its (last) statement
  std::vector<const ir::Symbol*> fused; // Funcs fused into this one (directly or not), in order

  int warps() const { return num_warps.value_or(4); }
  /// `f.warp_specialize(k)` or `f.warp_specialize(k, m:16)` as written, for diagnostics.
  std::string warp_specialize_text() const;
  int stages() const { return num_stages.value_or(3); }
  std::optional<long long> block_of(ir::Label l) const {
    auto it = block.find(l);
    return it == block.end() ? std::nullopt : std::optional<long long>(it->second);
  }
  long long tensor_of(ir::Label l) const {
    auto it = tensor.find(l);
    return it == tensor.end() ? 1 : it->second;
  }
  /// A dimension is fully tensorized when its tensor size is 0 or equals its block size.
  bool fully_tensorized(ir::Label l) const {
    long long t = tensor_of(l);
    auto b = block_of(l);
    return t == 0 || (b && t == *b);
  }
};

struct Schedule {
  std::map<const ir::Symbol*, FuncSchedule> funcs;
  /// Each Func's dependencies after fusion: fusing f into g replaces f among g's dependencies
  /// by those of f's that g lacks (thesis 3.3.1.5). Funcs without an entry keep their own.
  std::map<const ir::Symbol*, std::vector<const ir::Symbol*>> deps;
  const std::vector<const ir::Symbol*>& deps_of(const ir::Program& p, const ir::Symbol* f) const {
    auto it = deps.find(f);
    return it == deps.end() ? p.def(f).deps : it->second;
  }
  std::vector<const ir::Symbol*> compiled; // in statement order, no repeats

  const FuncSchedule& of(const ir::Symbol* f) const;
  FuncSchedule& of(const ir::Symbol* f);
};

/// The canonical text of a schedule (no `compile` statements; see the spec's section 1).
std::string canonical_text(const Schedule& schedule, const ir::Program& program);

/// The labels of a Func's definition: its dimensions, then the RVars its definition reduces
/// over, in first-use order.
ir::Labels definition_labels(const ir::Program& program, const ir::Symbol* func);

/// The labels a Func's schedule may name, in canonical order: its definition's labels, then
/// those of the Funcs fused into it.
ir::Labels schedulable_labels(const ir::Program& program, const FuncSchedule& fs);

/// The default map: blocked dimensions, the last dimension outermost (the first varies fastest).
std::vector<MapLevel> default_map(const FuncSchedule& fs, const ir::Program& program);
/// The map loop nest a Func's kernel uses: its `map`, or the default.
std::vector<MapLevel> map_levels(const FuncSchedule& fs, const ir::Program& program);

} // namespace dtc
