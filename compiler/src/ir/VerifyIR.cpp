#include "ir/VerifyIR.h"

#include "ir/IRVisitor.h"

#include <algorithm>

namespace dtc {
namespace {

class Verifier : public ir::IRVisitor {
public:
  Verifier(const ir::Program& p, const char* pass) : prog_(p), pass_(pass) {}

  void fail(const ir::Expr& e, const std::string& what) {
    throw InternalError(std::string("IR verification failed after ") + pass_ + ": " + what +
                        " in `" + ir::to_dt(e) + "`");
  }
  void same(const ir::Expr& e, const ir::Labels& expect) {
    if (e.dims.size() != expect.size()) fail(e, "wrong dims");
    for (ir::Label l : expect)
      if (!ir::contains(e.dims, l)) fail(e, "wrong dims");
  }
  void visit(const ir::Access& e) override {
    if (e.tensor->kind == ir::SymbolKind::Func && prog_.def(e.tensor).dims.size() != e.index.size())
      fail(e, "rank mismatch");
    if (!e.pos.empty() && (e.pos.size() != e.index.size() || e.tensor->kind != ir::SymbolKind::In))
      fail(e, "positions of a Func, or not one per dimension");
    ir::IRVisitor::visit(e);
    same(e, ir::Access::position_dims(e.index, e.pos));
  }
  void visit(const ir::Binary& e) override {
    ir::IRVisitor::visit(e);
    same(e, ir::union_labels(e.a->dims, e.b->dims));
  }
  void visit(const ir::Unary& e) override {
    ir::IRVisitor::visit(e);
    same(e, e.a->dims);
  }
  // A reduction's operand may be constant along its RVar once fusion inlines a producer that
  // does not vary along it (`f[j] = 1` read as `rsum(f[j], j)`): it then sums len(j) copies.
  void visit(const ir::Reduce& e) override {
    ir::IRVisitor::visit(e);
    if (ir::contains(e.dims, e.rvar)) fail(e, "bad reduction");
    same(e, without(e.a->dims, e.rvar));
  }
  void visit(const ir::Dot& e) override {
    ir::IRVisitor::visit(e);
    if (ir::contains(e.dims, e.rvar)) fail(e, "bad rdot");
    same(e, without(ir::union_labels(e.a->dims, e.b->dims), e.rvar));
  }
  static ir::Labels without(ir::Labels labels, ir::Label l) {
    labels.erase(std::remove(labels.begin(), labels.end(), l), labels.end());
    return labels;
  }

private:
  const ir::Program& prog_;
  const char* pass_;
};

} // namespace

void verify_ir(const ir::Program& program, const char* after_pass) {
  Verifier v(program, after_pass);
  for (const auto& [f, def] : program.funcs) {
    if (!def.value) continue;
    def.value->accept(v);
    for (ir::Label l : def.value->dims)
      if (!ir::contains(def.dims, l))
        throw InternalError(std::string("IR verification failed after ") + after_pass + ": `" +
                            f->name + "` varies along a label outside its shape");
  }
}

} // namespace dtc
