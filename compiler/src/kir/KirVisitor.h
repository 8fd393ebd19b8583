#pragma once
// Walking and rewriting kernel IR. A pass derives from KirVisitor (to look) or KirMutator (to
// change) and overrides only the nodes it cares about; the base walks everything else, in
// evaluation order: a statement's operands (Stmt::operands) before a loop's body, an
// expression's operands before the expression.
#include "kir/KernelIR.h"

#include <map>
#include <string>
#include <vector>

namespace dtc::kir {

class KirVisitor {
public:
  virtual ~KirVisitor() = default;
  /// Every statement of the block, in order.
  virtual void visit(const std::vector<StmtPtr>& block);
  /// The statement's operands, then (a loop's) body.
  virtual void visit(const Stmt& s);
  /// The expression's operands. Values are shared: a node reached twice is visited twice.
  virtual void visit(const Expr& e);
};

class KirMutator {
public:
  virtual ~KirMutator() = default;
  /// Each statement of the block replaced by what mutate(StmtPtr) returns (itself, others or
  /// none).
  virtual void mutate(std::vector<StmtPtr>& block);
  /// By default the statement itself with its operands mutated and (a loop's) body mutated.
  virtual std::vector<StmtPtr> mutate(StmtPtr s);
  /// By default `e` with its operands mutated: the same node when none changed, else a copy
  /// with the new operands (types as before).
  virtual ExprPtr mutate(const ExprPtr& e);
};

/// Every value each name is bound to by an assignment of `block` (nested loops included), in
/// order: a name bound once has one.
std::map<std::string, std::vector<ExprPtr>> bindings(const std::vector<StmtPtr>& block);

} // namespace dtc::kir
