#pragma once
// Visitor and mutator bases for the algorithm IR. IRVisitor walks every child by default;
// IRMutator rebuilds a node only when one of its children changed, so a pass overrides just
// the nodes it rewrites.
#include "ir/IR.h"

namespace dtc::ir {

class IRVisitor {
public:
  virtual ~IRVisitor() = default;
  virtual void visit(const Const&) {}
  virtual void visit(const ScalarIn&) {}
  virtual void visit(const Len&) {}
  virtual void visit(const ProgramId&) {}
  virtual void visit(const LabelValue&) {}
  /// Walks the computed positions (a gather's index input is an access too).
  virtual void visit(const Access& e) {
    for (const ExprPtr& p : e.pos)
      if (p) p->accept(*this);
  }
  virtual void visit(const Unary& e) { e.a->accept(*this); }
  virtual void visit(const Binary& e) {
    e.a->accept(*this);
    e.b->accept(*this);
  }
  virtual void visit(const Call& e) {
    for (const ExprPtr& a : e.args)
      a->accept(*this);
  }
  virtual void visit(const Reduce& e) { e.a->accept(*this); }
  virtual void visit(const Dot& e) {
    e.a->accept(*this);
    e.b->accept(*this);
  }
  virtual void visit(const Reshape& e) { e.a->accept(*this); }
};

class IRMutator {
public:
  virtual ~IRMutator() = default;
  ExprPtr mutate(const ExprPtr& e);

protected:
  virtual ExprPtr visit(const Const&, const ExprPtr& self) { return self; }
  virtual ExprPtr visit(const ScalarIn&, const ExprPtr& self) { return self; }
  virtual ExprPtr visit(const Len&, const ExprPtr& self) { return self; }
  virtual ExprPtr visit(const ProgramId&, const ExprPtr& self) { return self; }
  virtual ExprPtr visit(const LabelValue&, const ExprPtr& self) { return self; }
  virtual ExprPtr visit(const Access& e, const ExprPtr& self);
  virtual ExprPtr visit(const Unary& e, const ExprPtr& self);
  virtual ExprPtr visit(const Binary& e, const ExprPtr& self);
  virtual ExprPtr visit(const Call& e, const ExprPtr& self);
  virtual ExprPtr visit(const Reduce& e, const ExprPtr& self);
  virtual ExprPtr visit(const Dot& e, const ExprPtr& self);
  virtual ExprPtr visit(const Reshape& e, const ExprPtr& self);
};

} // namespace dtc::ir
