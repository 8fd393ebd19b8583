// map(LEVEL, ...): the loop nest that maps program instance indices to output blocks, outermost
// level first (the last level varies fastest). A level is `VAR`, or `VAR:ID/FACTOR`, which splits
// VAR's block index into an outer level VAR and an inner level ID of FACTOR blocks; ID must be
// placed by a later argument. Every blocked dimension appears exactly once. Without `map`, the
// first dimension varies fastest, as in map(..., y, x).
#include "schedule/Primitive.h"

#include <set>

namespace dtc {

std::vector<MapLevel> default_map(const FuncSchedule& fs, const ir::Program& prog) {
  std::vector<MapLevel> levels;
  ir::Labels labels = schedulable_labels(prog, fs);
  for (auto it = labels.rbegin(); it != labels.rend(); ++it)
    if (fs.block_of(*it)) levels.push_back({(*it)->name, *it, 0, "", false, {}});
  return levels;
}

static bool same_map(const std::vector<MapLevel>& a, const std::vector<MapLevel>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].name != b[i].name || a[i].factor != b[i].factor || a[i].split_id != b[i].split_id)
      return false;
  return true;
}

std::vector<MapLevel> map_levels(const FuncSchedule& fs, const ir::Program& prog) {
  return fs.map ? *fs.map : default_map(fs, prog);
}

Primitive map_primitive() {
  Primitive p;
  p.name = "map";
  p.apply = [](PrimitiveContext& ctx) {
    if (ctx.target.map) {
      ctx.diags.error("map-repeated", ctx.stmt.loc,
                      "in " + stmt_text(ctx.stmt) + ": `" + ctx.func->name +
                          "` already has a `map`; give the whole loop nest in one "
                          "statement");
      return false;
    }
    std::vector<MapLevel> levels;
    std::set<std::string> pending_ids, placed;
    std::map<std::string, ir::Label> id_dim;
    bool ok = true;
    for (const ast::ScheduleArg& a : ctx.stmt.args) {
      if (a.name.empty() || (a.has_value && a.split_name.empty())) {
        ctx.diags.error("map-bad-argument", a.loc,
                        "in " + stmt_text(ctx.stmt) +
                            ": `map` arguments are `VAR` or "
                            "`VAR:ID/FACTOR`, as in `map(x:xi/4, y, xi)`");
        ok = false;
        continue;
      }
      if (placed.count(a.name)) {
        ctx.diags.error("map-duplicate-level", a.loc,
                        "in " + stmt_text(ctx.stmt) + ": `" + a.name +
                            "` appears twice "
                            "in the loop nest");
        ok = false;
        continue;
      }
      MapLevel level;
      level.name = a.name;
      level.loc = a.loc;
      if (pending_ids.count(a.name)) {
        level.is_split_inner = true;
        level.dim = id_dim[a.name];
        pending_ids.erase(a.name);
      } else {
        level.dim = schedule_label(ctx, a, "dimension");
        if (!level.dim) {
          ok = false;
          continue;
        }
      }
      if (a.has_value && level.is_split_inner) {
        // Its block index would be the outer split's inner index, a range of `factor`, which
        // a second split does not tile (its surplus instances would repeat blocks).
        ctx.diags.error("map-split-of-split", a.loc,
                        "in " + stmt_text(ctx.stmt) + ": `" + a.name +
                            "` is a split level and cannot be split again; split `" +
                            level.dim->name + "` once, with the product of the factors");
        ok = false; // go on as if it were allowed, so that `kj` is known to later arguments
      }
      if (a.has_value) {
        if (a.value < 1) {
          ctx.diags.error("map-bad-split-factor", a.loc,
                          "in " + stmt_text(ctx.stmt) + ": split factor of `" + a.name +
                              "` must be at least 1");
          ok = false;
          continue;
        }
        if (ctx.program.find(a.split_name) || placed.count(a.split_name) ||
            pending_ids.count(a.split_name) || a.split_name == a.name) {
          ctx.diags.error("map-split-name-in-use", a.loc,
                          "in " + stmt_text(ctx.stmt) + ": split name `" + a.split_name +
                              "` is already in use; choose a fresh name");
          ok = false;
          continue;
        }
        level.factor = a.value;
        level.split_id = a.split_name;
        pending_ids.insert(a.split_name);
        id_dim[a.split_name] = level.dim;
      }
      placed.insert(a.name);
      levels.push_back(level);
    }
    for (const std::string& id : pending_ids) {
      ctx.diags.error("map-split-not-placed", ctx.stmt.loc,
                      "in " + stmt_text(ctx.stmt) + ": split level `" + id +
                          "` is never placed; add `" + id + "` after the split");
      ok = false;
    }
    if (ok) ctx.target.map = levels;
    return ok;
  };
  p.validate = [](const FuncSchedule& fs, const ir::Program& prog, DiagnosticEngine& diags) {
    Loc loc = fs.where.at("map");
    std::set<ir::Label> mapped;
    for (const MapLevel& level : *fs.map) {
      if (level.is_split_inner) continue;
      mapped.insert(level.dim);
      if (!fs.block_of(level.dim))
        diags.error("map-unblocked-level", level.loc,
                    "in `" + fs.func->name + ".map(...)`: `" + level.name +
                        "` is not blocked, so it has a single block to map; block it "
                        "or leave it out of `map`");
    }
    for (ir::Label l : schedulable_labels(prog, fs))
      if (fs.block_of(l) && !mapped.count(l))
        diags.error("map-missing-dimension", loc,
                    "in `" + fs.func->name + ".map(...)`: blocked dimension `" + l->name +
                        "` is missing from the loop nest; `map` must place every blocked "
                        "dimension");
  };
  p.print = [](const FuncSchedule& fs, const ir::Program& prog) -> std::optional<std::string> {
    if (!fs.map || same_map(*fs.map, default_map(fs, prog))) return std::nullopt;
    std::string out;
    for (const MapLevel& level : *fs.map) {
      out += (out.empty() ? "" : ",") + level.name;
      if (level.factor) out += ":" + level.split_id + "/" + std::to_string(level.factor);
    }
    return out;
  };
  return p;
}

} // namespace dtc
