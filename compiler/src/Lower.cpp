// The compiler pipeline: a flat, ordered sequence of passes, each verified. This is the one
// place that decides the order:
//
//   parse -> check -> fold constants (verify IR) -> apply schedule -> python names
//   -> inline fused Funcs (verify IR) -> split blocked reductions (verify IR)
//   -> fold reductions onto tied output labels (verify IR) -> online softmax (verify IR)
//   -> plan kernels
//   -> lower each kernel (verify kernel) -> the kernel passes of kKernelPasses, each verified
//      and dumped on request (`dtc --dump-after=PASS`) -> check tensor sizes
//   -> check a warp-specialized product's partitions (kir/WarpPartitions.h) -> print module
//      (a warp-specialized kernel a second time in Gluon, codegen/GluonPrinter.cpp)
#include "Pipeline.h"
#include "codegen/PythonCodegen.h"
#include "codegen/WrapperSignature.h"
#include "dtc/Compiler.h"
#include "frontend/Checker.h"
#include "frontend/Parser.h"
#include "ir/ConstantFold.h"
#include "ir/VerifyIR.h"
#include "kir/CommonSubexpressions.h"
#include "kir/Dump.h"
#include "kir/EliminateDeadCode.h"
#include "kir/FoldScaleConstants.h"
#include "kir/HoistLoopInvariants.h"
#include "kir/KeepReReadsInCache.h"
#include "kir/MaxBeforeScale.h"
#include "kir/OnlinePartitions.h"
#include "kir/PeelPartialTile.h"
#include "kir/RoundBeforeShift.h"
#include "kir/SimplifyMasks.h"
#include "kir/VerifyKernel.h"
#include "kir/WarpPartitions.h"
#include "lower/CheckTensorSizes.h"
#include "lower/FoldTiedReductions.h"
#include "lower/InlineFused.h"
#include "lower/LowerFunc.h"
#include "lower/Names.h"
#include "lower/OnlineSoftmax.h"
#include "lower/SplitReductions.h"

#include <functional>
#include <set>

namespace dtc {
namespace {

/// The passes over each kernel after lowering, in order: a name for --dump-after, the words of
/// the verifier's message, the pass.
struct KernelPass {
  const char* name;
  const char* what;
  void (*run)(kir::Kernel&);
};
constexpr KernelPass kKernelPasses[] = {
    {"scale", "constant factors into scalar scales", fold_scale_constants},
    {"maxfirst", "the row maximum before the scale", max_before_scale},
    {"hoist", "loop-invariant code motion", hoist_loop_invariants},
    {"cse", "common subexpressions", eliminate_common_subexpressions},
    {"masks", "mask simplification", simplify_masks},
    {"dce", "dead code", eliminate_dead_code},
    {"evict", "cache hints for re-read inputs", keep_rereads_in_cache},
    {"peel", "the partial tile in a loop of its own", peel_partial_tiles},
    {"round", "products rounded before a maximum is subtracted", round_before_shift},
};

/// Lowers `k`, then runs every kernel pass, verifying after each and dumping where asked.
kir::Kernel build_kernel(const ir::Program& program, const KernelPlan& plan, const PythonNames& py,
                         const ir::Symbol* k, const CompileOptions& options,
                         DiagnosticEngine& diags, std::string& dumps) {
  auto dump = [&](const char* pass, const kir::Kernel& kernel) {
    for (const std::string& d : options.dump_after)
      if (d == "all" || d == pass) {
        dumps += std::string("// after ") + pass + ": " + kernel.name + "\n" + kir::dump(kernel);
        return;
      }
  };
  kir::Kernel kernel = lower_func(program, plan, py, k, diags);
  if (diags.has_errors()) return kernel;
  verify_kernel(kernel, "lowering");
  dump("lower", kernel);
  for (const KernelPass& pass : kKernelPasses) {
    pass.run(kernel);
    verify_kernel(kernel, pass.what);
    dump(pass.name, kernel);
  }
  return kernel;
}

/// A warp-specialized product runs on Hopper as a Gluon kernel of a producer and a consumer
/// partition (kir/WarpPartitions.h). A kernel that does not split into them keeps Triton's own
/// warp specialization after Hopper but runs its plain loop there, which a warning says; an
/// epilogue that cannot run in the chunks `warp_specialize(k, m:R)` asks for is an error.
void check_warp_partitions(const kir::Kernel& kernel, const FuncSchedule& fs,
                           DiagnosticEngine& diags) {
  if (!fs.warp_specialize) return;
  const std::string stmt = "in `" + fs.warp_specialize_text() + "`: ";
  std::string why;
  auto plain = [&](const std::string& form) {
    diags.warning(fs.where.at("warp_specialize"),
                  stmt + "on Hopper " + form + ", and here " + why +
                      "; there its loop is a plain one, as without `warp_specialize`");
  };
  if (fs.online) {
    if (!kir::online_partitions(kernel, why))
      plain("the online loop runs in a producer and consumer partitions");
    return;
  }
  std::optional<kir::WarpPartitions> p = kir::warp_partitions(kernel, why);
  if (!p) {
    plain("the product runs in a producer and a consumer partition");
    return;
  }
  if (kernel.epilogue_rows &&
      !kir::stage_epilogue(*p, kernel.epilogue_rows, 0, "_dt_row", "_dt_rows", why)) {
    diags.error("warp-specialize-unsupported", fs.where.at("warp_specialize"),
                stmt + why + "; drop the rows (`" + fs.func->name + ".warp_specialize(" +
                    (*fs.warp_specialize)->name + ")`)");
    return;
  }
  // The Gluon kernel's shared memory, known here (its operands are 16-bit): a kernel that needs
  // more than a Hopper block has would fail at its first launch there.
  const long long ring = kir::ring_bytes(*p, kernel.num_stages);
  const long long stage = kernel.epilogue_rows ? kir::stage_bytes(*p) : 0;
  if (ring + stage > kir::kHopperSharedBytes)
    diags.error("warp-specialize-shared-memory", fs.where.at("warp_specialize"),
                stmt + "on Hopper the product's ring of " + std::to_string(kernel.num_stages) +
                    " stages takes " + std::to_string(ring) + " bytes of shared memory" +
                    (stage ? " and the epilogue's float32 stage " + std::to_string(stage) : "") +
                    ", more than the " + std::to_string(kir::kHopperSharedBytes) +
                    " an H100 gives a program; use fewer stages, smaller tiles" +
                    (stage ? " or no rows" : ""));
}

/// The Funcs that need a kernel to compute `func`, dependencies first (a Func fused into its
/// consumer has none of its own).
std::vector<const ir::Symbol*> plan_kernels(const ir::Program& program, const ir::Symbol* func) {
  std::vector<const ir::Symbol*> order;
  std::set<const ir::Symbol*> seen;
  std::function<void(const ir::Symbol*)> visit = [&](const ir::Symbol* f) {
    if (!seen.insert(f).second) return;
    for (const ir::Symbol* d : program.def(f).deps)
      visit(d);
    order.push_back(f);
  };
  visit(func);
  return order;
}

CompileResult run(std::string_view source, const CompileOptions& options, DiagnosticEngine& diags) {
  CompileResult result;
  std::unique_ptr<Frontend> front = run_frontend(source, diags, options.emit == Emit::Ast);
  if (!front) return result;
  if (options.emit == Emit::Ast) {
    result.output = ast::print(front->ast);
    return result;
  }
  const ast::Program& ast = front->ast;
  ir::Program& program = front->program;
  if (options.emit == Emit::Ir) {
    result.output = ir::print(program);
    return result;
  }

  Schedule schedule;
  std::vector<ast::ScheduleStmt> stmts;
  if (options.schedule) {
    stmts = replacement_schedule(ast, *options.schedule, diags);
    if (diags.has_errors()) return result;
  } else {
    stmts = ast.schedule;
  }
  diags.set_phase("schedule");
  apply_schedule(stmts, program, schedule, diags);
  if (diags.has_errors()) return result;
  result.canonical_schedule = canonical_text(schedule, program);
  if (options.emit == Emit::Canonical) {
    result.output = result.canonical_schedule + "\n";
    return result;
  }
  // The reference evaluates the algorithm as written, before fusion and splitting.
  std::map<const ir::Symbol*, ir::FuncDef> written = program.funcs;
  diags.set_phase("fusion");
  // What lowering decides goes to the plan; the schedule stays as written.
  KernelPlan plan(schedule);
  PythonNames py(program);
  inline_fused_funcs(program, plan, diags);
  if (diags.has_errors()) return result;
  verify_ir(program, "fusion");
  diags.set_phase("schedule");
  split_reductions(program, plan, py, diags);
  if (diags.has_errors()) return result;
  verify_ir(program, "splitting reductions");
  fold_tied_reductions(program, plan);
  verify_ir(program, "folding tied reductions");
  plan_online(program, plan, diags);
  if (diags.has_errors()) return result;
  verify_ir(program, "online softmax");

  diags.set_phase("lowering");
  ModuleInput module;
  module.program = &program;
  module.plan = &plan;
  module.names = &py;
  module.file_name = options.file_name;
  module.canonical_schedule = result.canonical_schedule;
  module.reference_defs = written;
  if (schedule.compiled.empty())
    diags.warning({}, "no Func is compiled, so the module has no kernels; add `f.compile();` for "
                      "the Func to generate");
  for (const ir::Symbol* f : schedule.compiled) {
    CompiledFunc c{f, plan_kernels(program, f)};
    for (const ir::Symbol* k : c.kernel_funcs) {
      if (module.kernels.count(k)) continue;
      kir::Kernel kernel = build_kernel(program, plan, py, k, options, diags, result.dumps);
      if (diags.has_errors()) return result;
      const FuncSchedule& fs = plan.of(k);
      check_tensor_sizes(
          kernel, k->name,
          fs.where.count("tensorize") ? fs.where.at("tensorize") : program.def(k).loc, diags);
      if (diags.has_errors()) return result;
      check_warp_partitions(kernel, fs, diags);
      if (diags.has_errors()) return result;
      module.kernels.emplace(k, std::move(kernel));
    }
    module.compiled.push_back(std::move(c));
  }
  for (const CompiledFunc& c : module.compiled) {
    WrapperSignature sig = wrapper_signature(module, c);
    CallSizes sizes{c.func->name, {}, {}};
    for (ir::Label l : sig.labels)
      sizes.labels.push_back(l->name);
    for (const auto& [l, root] : sig.tied)
      sizes.tied[l->name] = root->name;
    result.call_sizes.push_back(std::move(sizes));
  }
  if (options.emit == Emit::Check) return result;
  result.output = print_module(module);
  return result;
}

} // namespace

const std::vector<std::string>& kernel_passes() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n{"lower"};
    for (const KernelPass& p : kKernelPasses)
      n.push_back(p.name);
    return n;
  }();
  return names;
}

std::unique_ptr<Frontend> run_frontend(std::string_view source, DiagnosticEngine& diags,
                                       bool stop_after_parse) {
  auto front = std::make_unique<Frontend>();
  diags.set_phase("syntax");
  front->ast = parse_program(source, diags);
  if (diags.has_errors()) return nullptr;
  if (stop_after_parse) return front;
  diags.set_phase("semantic");
  front->program = check_program(front->ast, diags);
  if (diags.has_errors()) return nullptr;
  for (auto& [f, def] : front->program.funcs)
    def.value = fold_constants(def.value);
  verify_ir(front->program, "constant folding");
  return front;
}

std::vector<ast::ScheduleStmt> replacement_schedule(const ast::Program& ast, std::string_view text,
                                                    DiagnosticEngine& diags) {
  // Keep which Funcs the file compiles; take everything else from the given schedule.
  std::vector<ast::ScheduleStmt> stmts;
  for (const ast::ScheduleStmt& s : ast.schedule)
    if (s.primitive.text == "compile" || s.primitive.text == "compile_to_kernel")
      stmts.push_back(s);
  // Its diagnostics point into the schedule text, shown as `<schedule>:line:col`.
  diags.set_phase("syntax");
  int id = diags.add_source("<schedule>", text);
  std::vector<ast::ScheduleStmt> extra = parse_schedule(text, diags, id);
  stmts.insert(stmts.end(), std::make_move_iterator(extra.begin()),
               std::make_move_iterator(extra.end()));
  return stmts;
}

std::vector<Message> messages_of(const DiagnosticEngine& diags) {
  std::vector<Message> out;
  for (const Diagnostic& d : diags.diagnostics()) {
    Message m;
    m.code = d.code;
    m.severity = d.severity == Severity::Error     ? "error"
                 : d.severity == Severity::Warning ? "warning"
                                                   : "note";
    m.source = diags.source_name(d.loc.source);
    m.line = d.loc.line;
    m.col = d.loc.col;
    m.text = d.message;
    out.push_back(std::move(m));
  }
  return out;
}

CompileResult compile(std::string_view source, const CompileOptions& options) {
  DiagnosticEngine diags(options.file_name, source);
  CompileResult result;
  try {
    result = run(source, options, diags);
  } catch (const InternalError& e) {
    diags.error("internal", {}, std::string(e.what()) + " (please report this compiler bug)");
  } catch (const std::exception& e) {
    diags.error("internal", {},
                std::string("internal error: ") + e.what() + " (please report this compiler bug)");
  }
  result.error_count = diags.error_count();
  result.ok = !diags.has_errors();
  result.diagnostics = diags.render();
  result.messages = messages_of(diags);
  if (!result.ok) {
    result.output.clear();
    result.call_sizes.clear();
  }
  return result;
}

} // namespace dtc
