// dtc::Algorithm: the front end run once, then many schedules applied to its checked program.
#include "dtc/Algorithm.h"

#include "Pipeline.h"
#include "frontend/Parser.h"
#include "schedule/Primitive.h"

#include <algorithm>
#include <mutex>

namespace dtc {

struct Algorithm::Impl {
  std::string source, file_name;
  std::unique_ptr<Frontend> front; // null when the program has errors
  std::string diagnostics, own_canonical;
  std::vector<Message> messages;
  std::vector<FuncInfo> funcs;
  std::once_flag call_sizes_once;
  std::vector<CallSizes> call_sizes;
};

struct Statements::Impl {
  std::string text;
  std::vector<ast::ScheduleStmt> stmts;
  std::vector<Message> messages;
  std::vector<Statements::Statement> view;
  bool ok = false;
};

Statements::Statements() : impl_(std::make_shared<Impl>()) {}
bool Statements::ok() const {
  return impl_->ok;
}
const std::string& Statements::text() const {
  return impl_->text;
}
const std::vector<Message>& Statements::messages() const {
  return impl_->messages;
}
const std::vector<Statements::Statement>& Statements::statements() const {
  return impl_->view;
}

namespace {

/// Errors first (in report order), then warnings and notes.
void errors_first(std::vector<Message>& messages) {
  std::stable_partition(messages.begin(), messages.end(),
                        [](const Message& m) { return m.severity == "error"; });
}

std::vector<FuncScheduleInfo> describe(const Schedule& schedule, const ir::Program& program) {
  std::vector<const FuncSchedule*> ordered;
  for (const auto& [f, fs] : schedule.funcs)
    ordered.push_back(&fs);
  std::sort(ordered.begin(), ordered.end(), [](const FuncSchedule* a, const FuncSchedule* b) {
    return a->func->name < b->func->name;
  });
  std::vector<FuncScheduleInfo> out;
  for (const FuncSchedule* fs : ordered) {
    FuncScheduleInfo info;
    info.func = fs->func->name;
    info.num_warps = fs->warps();
    info.num_stages = fs->stages();
    if (fs->fuse_at) {
      info.fused_into = fs->fuse_at->into->name;
      info.fused_at = fs->fuse_at->at->name;
    }
    for (ir::Label l : schedulable_labels(program, *fs)) {
      LabelSchedule ls;
      ls.label = l->name;
      ls.reduction = l->kind == ir::SymbolKind::RVar;
      ls.block = fs->block_of(l).value_or(0);
      ls.tensor = fs->fully_tensorized(l) ? 0 : fs->tensor_of(l);
      if (fs->map)
        for (const MapLevel& m : *fs->map)
          if (m.dim == l && m.factor > 0 && !m.is_split_inner) ls.split = m.factor;
      info.labels.push_back(std::move(ls));
    }
    out.push_back(std::move(info));
  }
  return out;
}

bool lowering_matters(const std::vector<FuncScheduleInfo>& funcs) {
  for (const FuncScheduleInfo& f : funcs) {
    if (!f.fused_into.empty()) return true;
    for (const LabelSchedule& l : f.labels)
      if (l.reduction && l.block > 0) return true;
  }
  return false;
}

} // namespace

std::string ScheduleInfo::reason() const {
  for (const Message& m : messages)
    if (m.severity == "error") return m.code;
  return "";
}

Algorithm::Algorithm(std::string source, std::string file_name) : impl_(std::make_unique<Impl>()) {
  impl_->source = std::move(source);
  impl_->file_name = std::move(file_name);
  DiagnosticEngine diags(impl_->file_name, impl_->source);
  try {
    impl_->front = run_frontend(impl_->source, diags);
    if (impl_->front) {
      const ir::Program& program = impl_->front->program;
      diags.set_phase("schedule");
      Schedule own;
      apply_schedule(impl_->front->ast.schedule, program, own, diags);
      if (!diags.has_errors()) impl_->own_canonical = canonical_text(own, program);
      std::vector<const ir::Symbol*> funcs;
      for (const auto& [f, def] : program.funcs)
        funcs.push_back(f);
      std::sort(funcs.begin(), funcs.end(),
                [](const ir::Symbol* a, const ir::Symbol* b) { return a->order < b->order; });
      for (const ir::Symbol* f : funcs) {
        FuncInfo info;
        info.name = f->name;
        const ir::FuncDef& def = program.def(f);
        for (ir::Label l : def.dims)
          info.dims.push_back(l->name);
        for (ir::Label l : definition_labels(program, f))
          if (l->kind == ir::SymbolKind::RVar) info.rvars.push_back(l->name);
        info.compiled =
            std::find(own.compiled.begin(), own.compiled.end(), f) != own.compiled.end();
        impl_->funcs.push_back(std::move(info));
      }
    }
  } catch (const std::exception& e) {
    diags.error("internal", {}, std::string(e.what()) + " (please report this compiler bug)");
  }
  if (diags.has_errors()) impl_->front.reset();
  impl_->diagnostics = diags.render();
  impl_->messages = messages_of(diags);
  errors_first(impl_->messages);
}

Algorithm::~Algorithm() = default;
Algorithm::Algorithm(Algorithm&&) noexcept = default;
Algorithm& Algorithm::operator=(Algorithm&&) noexcept = default;

bool Algorithm::ok() const {
  return impl_->front != nullptr;
}
const std::string& Algorithm::source() const {
  return impl_->source;
}
const std::string& Algorithm::file_name() const {
  return impl_->file_name;
}
const std::string& Algorithm::diagnostics() const {
  return impl_->diagnostics;
}
const std::vector<Message>& Algorithm::messages() const {
  return impl_->messages;
}
const std::vector<FuncInfo>& Algorithm::funcs() const {
  return impl_->funcs;
}
const std::string& Algorithm::own_canonical() const {
  return impl_->own_canonical;
}

const std::vector<CallSizes>& Algorithm::call_sizes() const {
  std::call_once(impl_->call_sizes_once, [this] {
    // The default schedule: the file's `compile` statements only. Which labels a call needs
    // follows from the algorithm as written, which every schedule computes.
    if (ok()) impl_->call_sizes = compile("", Emit::Check).call_sizes;
  });
  return impl_->call_sizes;
}

bool Algorithm::is_primitive(std::string_view name) {
  for (const Primitive& p : primitive_table())
    if (name == p.name) return true;
  return false;
}

Statements Algorithm::parse_statements(std::string_view text) {
  auto impl = std::make_shared<Statements::Impl>();
  impl->text = std::string(text);
  DiagnosticEngine diags("<schedule>", impl->text);
  try {
    diags.add_source("<schedule>", impl->text);
    impl->stmts = parse_schedule(impl->text, diags, 1);
  } catch (const std::exception& e) {
    diags.error("internal", {}, std::string(e.what()) + " (please report this compiler bug)");
  }
  impl->messages = messages_of(diags);
  impl->ok = !diags.has_errors();
  for (const ast::ScheduleStmt& s : impl->stmts) {
    Statements::Statement v{s.func.text, s.primitive.text, {}};
    for (const ast::ScheduleArg& a : s.args)
      v.args.push_back({a.name, a.has_value, a.value, a.split_name});
    impl->view.push_back(std::move(v));
  }
  return Statements(std::move(impl));
}

ScheduleInfo Algorithm::check_schedule(std::string_view text, bool lower) const {
  if (!ok()) {
    ScheduleInfo info;
    info.messages = impl_->messages;
    return info;
  }
  Statements parsed = parse_statements(text);
  return check_statements({&parsed}, lower);
}

ScheduleInfo Algorithm::check_statements(const std::vector<const Statements*>& parts,
                                         bool lower) const {
  ScheduleInfo info;
  if (!ok()) {
    info.messages = impl_->messages;
    return info;
  }
  for (const Statements* part : parts)
    if (!part->ok()) {
      info.messages = part->messages();
      errors_first(info.messages);
      return info;
    }
  DiagnosticEngine diags(impl_->file_name, impl_->source);
  try {
    const ir::Program& program = impl_->front->program;
    // The file's `compile` statements, then the parts.
    // Statements are applied where they are (no copies: this is the explorer's inner loop).
    // Their locations name source 1, `<schedule>`; line and column are within their part.
    std::vector<const ast::ScheduleStmt*> stmts;
    for (const ast::ScheduleStmt& s : impl_->front->ast.schedule)
      if (s.primitive.text == "compile" || s.primitive.text == "compile_to_kernel")
        stmts.push_back(&s);
    diags.add_source("<schedule>", parts.empty() ? std::string_view() : parts[0]->text());
    for (const Statements* part : parts)
      for (const ast::ScheduleStmt& s : part->impl().stmts)
        stmts.push_back(&s);
    diags.set_phase("schedule");
    Schedule schedule;
    apply_schedule(stmts, program, schedule, diags);
    if (!diags.has_errors()) {
      info.canonical = canonical_text(schedule, program);
      info.funcs = describe(schedule, program);
      info.lowering_matters = lowering_matters(info.funcs);
      // warp_specialize's product and tiles are checked as the kernel is built.
      for (const auto& [f, fs] : schedule.funcs)
        info.lowering_matters |= fs.warp_specialize.has_value();
    }
  } catch (const std::exception& e) {
    diags.error("internal", {}, std::string(e.what()) + " (please report this compiler bug)");
  }
  info.messages = messages_of(diags);
  info.ok = !diags.has_errors();
  if (info.ok && lower) {
    std::string text;
    for (const Statements* part : parts)
      text += part->text() + "\n";
    CompileResult full = compile(text, Emit::Check);
    if (!full.ok) {
      info.ok = false;
      info.messages = std::move(full.messages);
    }
  }
  if (!info.ok) info.canonical.clear();
  errors_first(info.messages);
  return info;
}

CompileResult Algorithm::compile(std::string_view schedule, Emit emit) const {
  CompileOptions options;
  options.file_name = impl_->file_name;
  options.schedule = std::string(schedule);
  options.emit = emit;
  return dtc::compile(impl_->source, options);
}

} // namespace dtc
