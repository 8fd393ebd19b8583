#pragma once
// Lowers one Func's definition, under its schedule, to a Triton kernel (kernel IR).
//
// Preconditions: `program` checked without errors, `py` names its symbols, the schedule applied
// and validated without errors, fusion and reduction splitting done (`plan`), and the Func is
// not fused into another (fused Funcs are computed inside their consumer's kernel).
//
// The kernel's tensors share one layout: one axis per tensorized dimension (output dimensions
// in definition order, then reduction labels), so every value is a tensor whose size along an
// axis is the tile width where it varies and 1 elsewhere, and operands broadcast by label.
#include "kir/KernelIR.h"
#include "lower/KernelPlan.h"
#include "lower/Names.h"

namespace dtc {

/// Builds the kernel computing `func`. User errors (schedule choices this compiler cannot
/// honour) are reported on `diags`; the result is then incomplete.
kir::Kernel lower_func(const ir::Program& program, const KernelPlan& plan, const PythonNames& py,
                       const ir::Symbol* func, DiagnosticEngine& diags);

/// The next power of two >= v (v >= 1).
long long next_power_of_two(long long v);

} // namespace dtc
