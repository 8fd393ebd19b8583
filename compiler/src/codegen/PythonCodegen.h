#pragma once
// Python code generation: prints the kernels (kernel IR) and writes, for every compiled Func,
// its wrapper, its PyTorch reference, its random-input helper, plus the canonical schedule.
#include "kir/KernelIR.h"
#include "lower/KernelPlan.h"
#include "lower/Names.h"

#include <set>
#include <string_view>

namespace dtc {

/// Everything needed to print one compiled Func: its kernels in launch order.
struct CompiledFunc {
  const ir::Symbol* func;
  std::vector<const ir::Symbol*> kernel_funcs; // Funcs with a kernel, dependencies first
};

struct ModuleInput {
  const ir::Program* program;
  const KernelPlan* plan;   // the schedule as lowering refined it, and what lowering decided
  const PythonNames* names; // every symbol's Python name
  std::string file_name;
  std::string canonical_schedule;
  std::vector<CompiledFunc> compiled;
  std::map<const ir::Symbol*, kir::Kernel> kernels;        // one per Func that has a kernel
  std::map<const ir::Symbol*, ir::FuncDef> reference_defs; // the algorithm as written
};

/// Prints one kernel as a `@triton.jit` function.
std::string print_kernel(const kir::Kernel& kernel);

/// A kernel's parameters, one group a line (a tensor's pointer and strides, the sizes, each
/// constexpr), each line indented and ending in a comma.
std::string kernel_params_text(const kir::Kernel& kernel);

/// The Gluon form of a kernel whose product loop is warp-specialized (kir/WarpPartitions.h):
/// `<name>_gluon`, its producer and consumer partitions, and `<name>_hopper`, the launch that
/// runs it on Hopper GPUs where the product qualifies and the Triton kernel elsewhere
/// (dt_runtime.py's _DtHopper). Empty where the kernel has no such partitions.
/// The arguments a Gluon kernel passes each of its partitions: its parameters, then `shared`
/// (the shared memory they share), in lines of Python.
std::string partition_args(const kir::Kernel& kernel, const std::string& shared);
/// `<k>_hopper = _DtHopper(...)`: the launch of kernel `kernel`'s Gluon form where the constexpr
/// `flags` hold on Hopper, with `warpgroups` (the producer's included) sharing the registers and
/// `warps` warps at launch (0: the kernel's own).
std::string print_hopper_launch(const kir::Kernel& kernel, const std::vector<std::string>& flags,
                                int warpgroups, int warps);
/// The Gluon form of a kernel whose online loop is warp-specialized
/// (codegen/GluonOnlinePrinter.cpp), or "" where it has none.
std::string print_gluon_online_kernel(const kir::Kernel& kernel);
std::string print_gluon_kernel(const kir::Kernel& kernel);

/// The name the wrapper launches a kernel under: `<name>_hopper` where it has a Gluon form.
std::string launched_kernel_name(const kir::Kernel& kernel);

/// The `@triton.jit` helpers a printed kernel calls: its intrinsics' (TritonMath.h) and the
/// printer's own (a NaN-propagating maximum or minimum, of a tile or atomic), and the helpers
/// those call.
std::set<std::string> kernel_helpers(const kir::Kernel& kernel);

/// The source of a helper that kernel_helpers names, without its `@triton.jit` line.
std::string kernel_helper_source(std::string_view name);

/// Prints the whole generated module.
std::string print_module(const ModuleInput& input);

} // namespace dtc
