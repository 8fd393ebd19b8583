#!/usr/bin/env python3
"""dtfuzz: a differential fuzzer for dtc, in the spirit of Csmith and YARPGen.

It draws random well-formed DT programs (1-4 Funcs in a DAG, inputs of rank 1-3, scalar inputs,
Var/RVar labels in random orders, label-aligned broadcasting, transposed reads, nested
reductions, rdot with every label order, arithmetic, element-wise builtins, comparisons, where,
len; whole numbers: labels' values, `//` and `%` of either sign, integer inputs `In T: int` and
`In T: int(y)`, `SIn n: int`, scalars with written values, masks such as `where(l <= m, a,
-inf)`; computed positions: shifts `X[x, y + 2]`, gathers `P[x, T[x]]` with positions inside and
outside the dimension, other whole numbers beside a plain read) and random schedules (block,
tensorize, map with splits, fuse_at, split and atomic reductions, store_in, precision,
num_warps, num_stages, persistent, tma (the Func's own store too), subtile, warp_specialize),
compiles them with `dtc`, runs the compiled Funcs under the Triton interpreter at small random
sizes, and compares the results with an evaluator of its own: the program's syntax tree
evaluated with torch in float64, every value a tensor over named labels. The module's
`reference` is not the oracle; it is checked against the evaluator separately ("reference bug").

Each failure is reduced by greedy delta debugging (drop schedule statements, Funcs and inputs,
replace subexpressions by their operands or literals, shrink sizes) to a small reproducer, written
to the output directory as a `.dt` file and a text file (sizes, dtype, expected vs got).

    python tests/fuzz/dtfuzz.py --minutes 20 --seed 1 --out /tmp/dtfuzz

With `--hopper` each module's Gluon kernels are compiled for sm_90 as well (what the interpreter
cannot run); `--online-rate R` makes a share R of the programs softmax chains for `online(l)`, and
`--attention-rate A` a share A of those FlashAttention's, scheduled only as the Gluon form asks
(the online loop's Gluon kernel: `--hopper --online-rate 0.5 --attention-rate 0.6` reaches it in
about one case in ten).

Library entry points: `generate_cases`, `run_case`, `reduce_case`, `fuzz`.
"""
import argparse
import collections
import dataclasses
import json
import math
import os
import pathlib
import random
import re
import subprocess
import sys
import tempfile
import time
import traceback

os.environ.setdefault("TRITON_INTERPRET", "1")
for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import torch  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
DTC = pathlib.Path(os.environ.get("DTC", ROOT / "build" / "compiler" / "dtc"))

# ------------------------------------------------------------------------------------------------
# Outcomes. Everything but OK and REJECTED is a finding.

OK = "ok"
REJECTED = "rejected"                 # dtc exit 1 with an ordinary diagnostic
DTC_CRASH = "dtc crash"               # signal, exit code other than 0/1, or a hang
INTERNAL = "internal error"           # "please report this compiler bug" / "internal error"
IMPORT = "module does not import"
RAISES = "kernel raises"
KERNEL_CRASH = "kernel crash"         # the process running the module died or hung
WRONG = "wrong result"
MAKE_INPUTS = "make_inputs raises"
SIZES = "disagreeing sizes accepted"  # labels that must be equal, given unequal: no ValueError
REFERENCE = "reference disagrees"
HOPPER = "Gluon kernel does not compile for sm_90"  # --hopper: a warp-specialized kernel's form
PROGRAM_REJECTED = "program rejected"  # a generated (legal) program rejected without schedule
# How a wrapper refuses sizes for which its kernel's tensors would pass Triton's limit
# (the runtime's _dt_check_numel): counted as a rejection.
SIZES_REFUSED = "Triton allows; tensorize fewer labels whole"
FAILURES = [DTC_CRASH, INTERNAL, IMPORT, RAISES, KERNEL_CRASH, WRONG, MAKE_INPUTS, REFERENCE,
            SIZES]

# ------------------------------------------------------------------------------------------------
# Programs. Expressions are nested lists (JSON-friendly):
#   ["num", "0.5"] (also "inf")  ["sin", s]  ["len", x]  ["lab", x] (a label's value)
#   ["acc", name, [positions]] (a position is a label, or a whole-number expression: a shift
#   `y + 2`, a gather `T[x]`, any other whole number)  ["neg", e]
#   ["bin", op, a, b] (op in + - * / // % < <= > >= == !=)  ["call", f, [args]]
#   ["red", rsum|rmax|rmin, e, k]  ["dot", a, b, k]
# Whole numbers (docs/language.md, "Positions and whole numbers"): labels' values, len, integer
# literals combined with whole numbers, integer inputs and SIn ints, and + - * // % - where
# maximum minimum of those.

ARITY = {
    "abs": 1, "ceil": 1, "floor": 1, "cos": 1, "sin": 1, "erf": 1, "exp": 1, "exp2": 1, "log": 1,
    "log2": 1, "rsqrt": 1, "sigmoid": 1, "sqrt": 1, "sqrt_rn": 1, "maximum": 2, "minimum": 2,
    "fdiv": 2, "div_rn": 2, "clamp": 3, "fma": 3, "where": 3, "tanh": 1, "sinh": 1, "cosh": 1,
    "tan": 1, "pow": 2, "log1p": 1, "expm1": 1, "log10": 1, "erfc": 1, "sign": 1,
    "reciprocal": 1, "square": 1, "relu": 1, "silu": 1, "softplus": 1, "gelu": 1, "gelu_tanh": 1,
}
CMP_OPS = ["<", "<=", ">", ">=", "==", "!="]
# Constructs that --avoid can leave out while a bug in them is open:
#   len-unused: len(y) of a label that nothing else uses; bool-arith: a comparison used as a
#   number (only as where's condition instead).
AVOIDABLE = ["len-unused", "bool-arith"]
LABEL_POOL = ["x", "y", "z", "w", "u", "v", "k", "r", "j", "m", "n", "p"]
# How often a program is a softmax chain for online(l) (Gen.online_chain).
ONLINE_RATE = 0.08
# How often such a chain is FlashAttention's, scheduled only as the Gluon form asks
# (attention_schedule): the other statements of random schedules mostly keep it from that form.
ATTENTION_RATE = 0.0


@dataclasses.dataclass
class Program:
    labels: dict                      # label -> "Var" | "RVar", declaration order
    inputs: dict                      # In name -> home labels (its rank is their number)
    sins: list                        # SIn names
    funcs: list                       # [[name, dims, expr]] in definition order
    compiled: list                    # compiled Func names
    # Integer inputs (`In T: int;`, `In T: int(y);`): name -> the label its values are
    # positions along, or "" (their home labels are in `inputs`, like any input's).
    ints: dict = dataclasses.field(default_factory=dict)
    sin_ints: list = dataclasses.field(default_factory=list)    # `SIn n: int;`
    sin_values: dict = dataclasses.field(default_factory=dict)  # `SIn eps = 1e-6;`: name -> text

    def to_json(self):
        return dataclasses.asdict(self)

    @staticmethod
    def from_json(d):
        return Program(**json.loads(json.dumps(d)))

    def copy(self):
        return Program.from_json(self.to_json())

    def func(self, name):
        for f in self.funcs:
            if f[0] == name:
                return f
        return None

    def rank(self, name):
        if name in self.inputs:
            return len(self.inputs[name])
        return len(self.func(name)[1])


@dataclasses.dataclass
class Case:
    program: Program
    schedule: list                    # schedule statements, without ';'
    sizes: dict                       # label -> size
    dtype: str = "float32"
    seed: int = 0                     # inputs' seed
    wild: bool = False                # non-finite values are expected (raw pow, 1/0)
    check_sizes: bool = False         # also pass disagreeing sizes: ValueError expected

    def to_json(self):
        return {"program": self.program.to_json(), "schedule": list(self.schedule),
                "sizes": dict(self.sizes), "dtype": self.dtype, "seed": self.seed,
                "wild": self.wild, "check_sizes": self.check_sizes}

    @staticmethod
    def from_json(d):
        return Case(Program.from_json(d["program"]), list(d["schedule"]), dict(d["sizes"]),
                    d.get("dtype", "float32"), d.get("seed", 0), d.get("wild", False),
                    d.get("check_sizes", False))


def pos_labels(p, prog):
    """The labels a position of an access varies along."""
    return [p] if isinstance(p, str) else expr_labels(p, prog)


def is_int_literal(text):
    return re.fullmatch(r"\d+", text) is not None


def is_whole(e, prog):
    """Whether `e` is a whole number, by the rule of docs/language.md: an integer literal takes
    the kind of what it combines with, so operands that are all bare literals make a number."""
    kind = e[0]
    if kind == "num":
        return is_int_literal(e[1])
    if kind in ("lab", "len"):
        return True
    if kind == "sin":
        return e[1] in prog.sin_ints
    if kind == "acc":
        return e[1] in prog.ints
    if kind == "neg":
        return is_whole(e[1], prog)

    def combined(ops):
        return all(is_whole(o, prog) for o in ops) and any(o[0] != "num" for o in ops)
    if kind == "bin":
        if e[1] == "//":
            return True
        if e[1] == "/" or e[1] in CMP_OPS:
            return False
        return combined([e[2], e[3]])
    if kind == "call":
        if e[1] == "where":
            return combined(e[2][1:])
        if e[1] in ("maximum", "minimum"):
            return combined(e[2])
    return False


def extent_label(p, prog):
    """The label whose size is the extent of the dimension that position `p` reaches: `y` of
    `y`, `y + c`, `y - c`, `c + y` (c not varying), `T[x]` of `In T: int(y)`; else None (a
    label that reads that dimension elsewhere gives it)."""
    if isinstance(p, str):
        return p
    kind = p[0]
    if kind == "lab":
        return p[1]
    if kind == "acc":
        return prog.ints.get(p[1]) or None
    if kind == "bin" and p[1] in "+-":
        if not expr_labels(p[3], prog):
            return extent_label(p[2], prog)
        if p[1] == "+" and not expr_labels(p[2], prog):
            return extent_label(p[3], prog)
    return None


def expr_labels(e, prog):
    """The labels `e` varies along, in first-appearance order (label alignment)."""
    kind = e[0]
    if kind in ("num", "sin", "len"):
        return []
    if kind == "lab":
        return [e[1]]
    if kind == "acc":
        out = []
        for p in e[2]:
            out = _union(out, pos_labels(p, prog))
        return out
    if kind == "neg":
        return expr_labels(e[1], prog)
    if kind == "bin":
        return _union(expr_labels(e[2], prog), expr_labels(e[3], prog))
    if kind == "call":
        out = []
        for a in e[2]:
            out = _union(out, expr_labels(a, prog))
        return out
    if kind == "red":
        return [l for l in expr_labels(e[2], prog) if l != e[3]]
    if kind == "dot":
        return [l for l in _union(expr_labels(e[1], prog), expr_labels(e[2], prog)) if l != e[3]]
    raise ValueError(f"unknown node {kind}")


def _union(a, b):
    return list(a) + [l for l in b if l not in a]


def children(e):
    kind = e[0]
    if kind == "neg":
        return [e[1]]
    if kind == "bin":
        return [e[2], e[3]]
    if kind == "call":
        return list(e[2])
    if kind == "red":
        return [e[2]]
    if kind == "dot":
        return [e[1], e[2]]
    return []


def walk(e):
    """Every node of `e`, the positions of its accesses included."""
    yield e
    for c in children(e):
        yield from walk(c)
    if e[0] == "acc":
        for p in e[2]:
            if not isinstance(p, str):
                yield from walk(p)


def expr_text(e):
    kind = e[0]
    if kind == "num":
        return e[1]
    if kind == "sin":
        return e[1]
    if kind == "len":
        return f"len({e[1]})"
    if kind == "lab":
        return e[1]
    if kind == "acc":
        return f"{e[1]}[{', '.join(p if isinstance(p, str) else expr_text(p) for p in e[2])}]"
    if kind == "neg":
        inner = expr_text(e[1])
        return f"-{inner}" if _prec(e[1]) >= 4 else f"-({inner})"
    if kind == "bin":
        # Parentheses only where precedence and left-associativity need them.
        p = _prec(e)
        a, b = expr_text(e[2]), expr_text(e[3])
        if _prec(e[2]) < p:
            a = f"({a})"
        if _prec(e[3]) <= p:
            b = f"({b})"
        return f"{a} {e[1]} {b}"
    if kind == "call":
        return f"{e[1]}({', '.join(expr_text(a) for a in e[2])})"
    if kind == "red":
        return f"{e[1]}({expr_text(e[2])}, {e[3]})"
    if kind == "dot":
        return f"rdot({expr_text(e[1])}, {expr_text(e[2])}, {e[3]})"
    raise ValueError(kind)


def _prec(e):
    if e[0] == "bin":
        return 1 if e[1] in CMP_OPS else 2 if e[1] in "+-" else 3
    if e[0] == "neg" or (e[0] == "num" and e[1].startswith("-")):
        return 4
    return 5


def program_text(prog, schedule=()):
    lines = []
    if prog.funcs:
        lines.append("Func " + ", ".join(f[0] for f in prog.funcs) + ";")
    if prog.inputs:
        lines.append("In " + ", ".join(
            n + ("" if n not in prog.ints else f": int({prog.ints[n]})" if prog.ints[n]
                 else ": int") for n in prog.inputs) + ";")
    if prog.sins:
        lines.append("SIn " + ", ".join(
            s + (": int" if s in prog.sin_ints else "")
            + (f" = {prog.sin_values[s]}" if s in prog.sin_values else "")
            for s in prog.sins) + ";")
    for kind in ("Var", "RVar"):
        names = [l for l, k in prog.labels.items() if k == kind]
        if names:
            lines.append(f"{kind} " + ", ".join(names) + ";")
    for name, dims, e in prog.funcs:
        lines.append(f"{name}[{', '.join(dims)}] = {expr_text(e)};")
    for s in schedule:
        lines.append(s + ";")
    for c in prog.compiled:
        lines.append(f"{c}.compile();")
    return "\n".join(lines) + "\n"


def check_program(prog):
    """Well-formedness as docs/language.md states it; returns an error string or None."""
    if any(r and r not in prog.labels for r in prog.ints.values()):
        return "the range of an integer input is not a label"
    defined = set()
    for name, dims, e in prog.funcs:
        if not dims or len(set(dims)) != len(dims):
            return f"{name}: bad dims"
        if any(d not in prog.labels for d in dims):
            return f"{name}: undeclared dim"
        err = _check_expr(e, prog, defined)
        if err:
            return f"{name}: {err}"
        if not set(expr_labels(e, prog)) <= set(dims):
            return f"{name}: right-hand side varies along more than the dims"
        defined.add(name)
    if not prog.compiled or any(prog.func(c) is None for c in prog.compiled):
        return "nothing compiled"
    return None


def _check_expr(e, prog, defined):
    kind = e[0]
    if kind == "sin" and e[1] not in prog.sins:
        return f"unknown SIn {e[1]}"
    if kind in ("len", "lab") and e[1] not in prog.labels:
        return f"unknown label {e[1]}"
    if kind == "bin" and e[1] == "//" and not (is_whole(e[2], prog) and is_whole(e[3], prog)):
        return "// of numbers"
    if kind == "acc":
        name, pos = e[1], e[2]
        if name in prog.inputs:
            rank = len(prog.inputs[name])
        elif name in defined:
            rank = len(prog.func(name)[1])
            if not all(isinstance(p, str) for p in pos):
                return f"Func {name} read at a computed position"
        else:
            return f"unknown or later Func {name}"
        extents = []
        for i, p in enumerate(pos):
            if not isinstance(p, str):
                if not is_whole(p, prog):
                    return "a position that is not a whole number"
                err = _check_expr(p, prog, defined)
                if err:
                    return err
            ext = extent_label(p, prog)
            if ext is None:
                ext = plain_dimension_label(prog, name, i)
                if ext is None:
                    return f"no label names the extent of {name}'s dimension {i + 1}"
            extents.append(ext)
        if rank != len(pos) or len(set(extents)) != len(extents):
            return f"bad access {name}{pos}"
        if any(l not in prog.labels for l in extents):
            return "undeclared label"
    if kind == "call" and ARITY.get(e[1]) != len(e[2]):
        return f"arity of {e[1]}"
    if kind in ("red", "dot"):
        k = e[-1]
        if prog.labels.get(k) != "RVar":
            return f"{k} is not an RVar"
        for c in children(e):
            if k not in expr_labels(c, prog):
                return f"operand of a reduction over {k} does not vary along it"
    for c in children(e):
        err = _check_expr(c, prog, defined)
        if err:
            return err
    return None


def plain_dimension_label(prog, name, i):
    """The label with which the first access of the program that has a label there reads input
    `name`'s dimension `i` (the extent of a computed position there)."""
    for _, _, e in prog.funcs:
        for n in walk(e):
            if n[0] == "acc" and n[1] == name and i < len(n[2]) and isinstance(n[2][i], str):
                return n[2][i]
    return None


def reads(e):
    return [n[1] for n in walk(e) if n[0] == "acc"]


def func_deps(prog, name):
    """Funcs that `name` reads, directly or not."""
    out, todo = [], [name]
    while todo:
        f = todo.pop()
        for r in reads(prog.func(f)[2]):
            if prog.func(r) is not None and r not in out:
                out.append(r)
                todo.append(r)
    return out


def used_inputs(prog, funcs=None):
    funcs = funcs or prog.compiled
    names = set()
    for f in [prog.func(c) for c in funcs] + [prog.func(d) for c in funcs
                                              for d in func_deps(prog, c)]:
        for n in walk(f[2]):
            if n[0] == "acc" and n[1] in prog.inputs:
                names.add(n[1])
            if n[0] == "sin":
                names.add(n[1])
    return names


# ------------------------------------------------------------------------------------------------
# Sizes: labels, input axes and Func axes that must have one size (union-find).

def size_classes(prog):
    parent = {}

    def find(a):
        parent.setdefault(a, a)
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    def union(a, b):
        parent[find(a)] = find(b)

    for l in prog.labels:
        find(("L", l))
    for name, labs in prog.inputs.items():
        for i in range(len(labs)):
            find(("I", name, i))
    for name, dims, e in prog.funcs:
        for i, d in enumerate(dims):
            union(("F", name, i), ("L", d))
        for n in walk(e):
            if n[0] == "acc":
                tag = "I" if n[1] in prog.inputs else "F"
                for i, p in enumerate(n[2]):
                    l = extent_label(p, prog)
                    if l is not None:       # else a plain access elsewhere ties the dimension
                        union((tag, n[1], i), ("L", l))
    return find


def complete_sizes(prog, sizes, rng=None):
    """Sizes for every label, equal within each size class (existing entries win)."""
    find = size_classes(prog)
    by_class = {}
    for l in prog.labels:
        if l in sizes:
            by_class.setdefault(find(("L", l)), sizes[l])
    out = {}
    for l in prog.labels:
        c = find(("L", l))
        if c not in by_class:
            by_class[c] = draw_size(rng) if rng else 3
        out[l] = by_class[c]
    return out


def draw_size(rng, zero=0.0):
    r = rng.random()
    if r < zero:
        return 0
    r = rng.random()
    if r < 0.15:
        return 1
    if r < 0.65:
        return rng.randint(2, 8)
    if r < 0.95:
        return rng.randint(9, 17)
    return rng.randint(18, 33)


def input_shapes(prog, sizes):
    find = size_classes(prog)
    class_size = {find(("L", l)): s for l, s in sizes.items() if l in prog.labels}
    shapes = {}
    for name, labs in prog.inputs.items():
        shapes[name] = tuple(class_size.get(find(("I", name, i)), 1) for i in range(len(labs)))
    return shapes


# ------------------------------------------------------------------------------------------------
# The evaluator: float64 torch, every value a tensor over named labels.

class EvalError(Exception):
    pass


def _to_layout(t, labs, layout):
    perm = [labs.index(l) for l in layout if l in labs]
    t = t.permute(perm) if perm else t
    shape = []
    it = iter(t.shape)
    for l in layout:
        shape.append(next(it) if l in labs else 1)
    return t.reshape(shape)


def _bf(name, args):
    a = args
    f64 = a[0].dtype
    if name == "abs":
        return a[0].abs()
    if name == "ceil":
        return torch.ceil(a[0])
    if name == "floor":
        return torch.floor(a[0])
    if name == "cos":
        return torch.cos(a[0])
    if name == "sin":
        return torch.sin(a[0])
    if name == "erf":
        return torch.special.erf(a[0])
    if name == "erfc":  # not 1 - erf: that cancels to 0 from x = 6 on
        return torch.special.erfc(a[0])
    if name == "exp":
        return torch.exp(a[0])
    if name == "exp2":
        return torch.pow(torch.tensor(2.0, dtype=f64), a[0])
    if name == "log":
        return torch.log(a[0])
    if name == "log2":
        return torch.log(a[0]) / math.log(2.0)
    if name == "log10":
        return torch.log(a[0]) / math.log(10.0)
    if name == "log1p":
        return torch.log1p(a[0])
    if name == "expm1":
        return torch.expm1(a[0])
    if name in ("sqrt", "sqrt_rn"):
        return torch.sqrt(a[0])
    if name == "rsqrt":
        return 1.0 / torch.sqrt(a[0])
    if name == "sigmoid":
        return 1.0 / (1.0 + torch.exp(-a[0]))
    # Maxima and minima are NaN where an operand is NaN, as torch's (docs/language.md).
    if name == "maximum":
        return torch.maximum(a[0], a[1])
    if name == "minimum":
        return torch.minimum(a[0], a[1])
    if name in ("fdiv", "div_rn"):
        return a[0] / a[1]
    if name == "clamp":
        return torch.minimum(torch.maximum(a[0], a[1]), a[2])
    if name == "fma":
        return a[0] * a[1] + a[2]
    if name == "where":
        return torch.where(a[0] != 0, a[1], a[2])
    if name == "tanh":
        return torch.tanh(a[0])
    if name == "sinh":
        return (torch.exp(a[0]) - torch.exp(-a[0])) / 2
    if name == "cosh":
        return (torch.exp(a[0]) + torch.exp(-a[0])) / 2
    if name == "tan":
        return torch.sin(a[0]) / torch.cos(a[0])
    if name == "pow":
        return torch.pow(a[0], a[1])
    if name == "sign":
        return (a[0] > 0).to(f64) - (a[0] < 0).to(f64)
    if name == "reciprocal":
        return 1.0 / a[0]
    if name == "square":
        return a[0] * a[0]
    if name == "relu":
        return torch.maximum(a[0], torch.zeros_like(a[0]))
    if name == "silu":
        return a[0] / (1.0 + torch.exp(-a[0]))
    if name == "softplus":
        return torch.log(1.0 + torch.exp(a[0]))
    if name == "gelu":
        return 0.5 * a[0] * (1.0 + torch.special.erf(a[0] / math.sqrt(2.0)))
    if name == "gelu_tanh":
        v = a[0]
        return 0.5 * v * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v ** 3)))
    raise EvalError(f"unknown builtin {name}")


class Evaluator:
    """Evaluates a Program on float64 inputs. Every value is (tensor, labels, uncertain): the
    last a boolean tensor marking elements that depend on a near-tie (a comparison of nearly
    equal values, floor/ceil/% near a step, sign near 0), which float32 may decide either way;
    those elements are not compared. NaN is compared exactly: maxima and minima propagate it. `max_abs` is the largest finite intermediate magnitude and
    `nonfinite` says whether any intermediate is not finite."""

    TIE = 1e-4

    def __init__(self, prog, sizes, inputs, scalars, dtype=torch.float64, dot_dtype=None):
        self.prog, self.sizes, self.inputs, self.scalars = prog, sizes, inputs, scalars
        self.dtype = dtype
        self.dot_dtype = dot_dtype  # rdot's operands rounded to it, as tl.dot's in the kernel
        self.values = {}
        self.uncertain = {}
        self.max_abs = 0.0
        self.nonfinite = False

    def _note(self, t):
        if t.numel():
            finite = torch.isfinite(t)
            if not bool(finite.all()):
                self.nonfinite = True
            if bool(finite.any()):
                self.max_abs = max(self.max_abs, float(t[finite].abs().max()))
        return t

    def func(self, name):
        if name not in self.values:
            f = self.prog.func(name)
            if f is None:
                raise EvalError(f"unknown Func {name}")
            _, dims, e = f
            t, labs, u = self.ev(e)
            t = self._num(t)                    # a Func's value is a number
            if not set(labs) <= set(dims):
                raise EvalError(f"{name} varies along {labs}, not within {dims}")
            shape = [self.sizes[d] for d in dims]
            self.values[name] = _to_layout(t, labs, dims).expand(shape).contiguous()
            self.uncertain[name] = _to_layout(u, labs, dims).expand(shape).contiguous()
        return self.values[name]

    def ev(self, e):
        t, labs, u = self._ev(e)
        self._note(t)
        u = u.expand(t.shape) if u.shape != t.shape else u
        return t, labs, u

    def _tie(self, a, b):
        return (a - b).abs() <= self.TIE * (a.abs() + b.abs()) + 1e-6

    def _num(self, t):
        """A whole number where a number is wanted: converted."""
        return t if t.is_floating_point() else t.to(self.dtype)

    def _exact(self, e):
        """A value that float32 holds exactly: a whole number or a literal."""
        return e[0] == "num" or is_whole(e, self.prog)

    def _gather(self, name, pos):
        """An input read at computed positions; a position outside its dimension reads 0."""
        t = self.inputs[name]
        vals = []
        for p in pos:
            if isinstance(p, str):
                vals.append((torch.arange(self.sizes[p]), [p],
                             torch.zeros(self.sizes[p], dtype=torch.bool)))
            else:
                v, labs, u = self.ev(p)
                vals.append((v.to(torch.int64), labs, u))
        aligned, layout = _align2(vals)
        n = len(vals)
        idx, us = aligned[:n], aligned[n:]
        shape = torch.broadcast_shapes(*[i.shape for i in idx])
        idx = [i.expand(shape) for i in idx]
        inside = torch.ones(shape, dtype=torch.bool)
        for d, i in enumerate(idx):
            inside &= (i >= 0) & (i < t.shape[d])
        if t.numel() == 0:
            val = torch.zeros(shape, dtype=t.dtype)
        else:
            val = t[tuple(i.clamp(0, t.shape[d] - 1) for d, i in enumerate(idx))]
        val = torch.where(inside, val, torch.zeros((), dtype=t.dtype))
        u = torch.zeros(shape, dtype=torch.bool)
        for x in us:
            u = u | x
        return val, layout, u

    def _ev(self, e):
        f64 = self.dtype
        kind = e[0]
        no = torch.tensor(False)
        i64 = torch.int64
        if kind == "num":
            return torch.tensor(float(e[1]), dtype=f64), [], no
        if kind == "lab":
            return torch.arange(self.sizes[e[1]], dtype=i64), [e[1]], no
        if kind == "sin":
            if e[1] in self.prog.sin_ints:
                return torch.tensor(int(self.scalars[e[1]]), dtype=i64), [], no
            return torch.tensor(float(self.scalars[e[1]]), dtype=f64), [], no
        if kind == "len":
            return torch.tensor(self.sizes[e[1]], dtype=i64), [], no
        if kind == "acc":
            name, labs = e[1], list(e[2])
            if not all(isinstance(p, str) for p in labs):
                if name not in self.inputs:
                    raise EvalError(f"Func {name} read at a computed position")
                return self._gather(name, labs)
            if name in self.inputs:
                t, u = self.inputs[name], torch.zeros(self.inputs[name].shape, dtype=torch.bool)
            else:
                t, u = self.func(name), self.uncertain[name]
            want = [self.sizes[l] for l in labs]
            if list(t.shape) != want:
                raise EvalError(f"{name}{labs}: shape {list(t.shape)} but sizes {want}")
            return t, labs, u
        if kind == "neg":
            t, labs, u = self.ev(e[1])
            return -t, labs, u
        if kind == "bin":
            (a, b, ua, ub), layout = _align2([self.ev(e[2]), self.ev(e[3])])
            u = ua | ub
            op = e[1]
            if is_whole(e, self.prog):
                # Whole numbers stay whole: `//` and `%` round toward zero (C, torch.fmod).
                a, b = a.to(i64), b.to(i64)
                if op == "//":
                    return torch.div(a, b, rounding_mode="trunc"), layout, u
                if op == "%":
                    return torch.fmod(a, b), layout, u
                return {"+": a + b, "-": a - b, "*": a * b}[op], layout, u
            if op in CMP_OPS and self._exact(e[2]) and self._exact(e[3]):
                cmp = {"<": torch.lt, "<=": torch.le, ">": torch.gt, ">=": torch.ge,
                       "==": torch.eq, "!=": torch.ne}[op]
                return cmp(self._num(a), self._num(b)).to(f64), layout, u
            a, b = self._num(a), self._num(b)
            if op == "+":
                return a + b, layout, u
            if op == "-":
                return a - b, layout, u
            if op == "*":
                return a * b, layout, u
            if op == "/":
                return a / b, layout, u
            if op == "%":
                r = torch.fmod(a, b)
                near = self.TIE * a.abs() + 1e-6          # a near a multiple of b
                return r, layout, u | (r.abs() <= near) | ((r.abs() - b.abs()).abs() <= near)
            cmp = {"<": torch.lt, "<=": torch.le, ">": torch.gt, ">=": torch.ge, "==": torch.eq,
                   "!=": torch.ne}[op]
            tie = self._tie(a, b)
            if op in ("==", "!="):          # exact equality is decided alike when both are exact
                tie = tie & (a != b)
            return cmp(a, b).to(f64), layout, u | tie
        if kind == "call":
            vals = [self.ev(a) for a in e[2]]
            aligned, layout = _align2(vals)
            n = len(vals)
            args, us = aligned[:n], aligned[n:]
            if is_whole(e, self.prog):
                args = [a if i == 0 and e[1] == "where" else a.to(i64)
                        for i, a in enumerate(args)]
                if e[1] == "where":
                    t = torch.where(args[0] != 0, args[1], args[2])
                else:
                    t = (torch.maximum if e[1] == "maximum" else torch.minimum)(args[0], args[1])
            else:
                args = [a if i == 0 and e[1] == "where" else self._num(a)
                        for i, a in enumerate(args)]
                t = _bf(e[1], args)
            shape = torch.broadcast_shapes(*[a.shape for a in args]) if args else ()
            u = us[0]
            for x in us[1:]:
                u = u | x
            v = args[0]
            if e[1] in ("floor", "ceil"):
                u = u | self._tie(v, torch.round(v))
            elif e[1] == "sign":
                u = u | (v.abs() <= 1e-5)
            elif e[1] == "where":
                u = u | (v.abs() <= 1e-6) & (v != 0)
            return t.expand(shape), layout, u.expand(shape)
        if kind in ("red", "dot"):
            k = e[-1]
            if kind == "red":
                t, labs, u = self.ev(e[2])
                t = self._num(t)
                op = e[1]
            else:
                (a, b, ua, ub), labs = _align2([self.ev(e[1]), self.ev(e[2])])
                a, b = self._num(a), self._num(b)
                if self.dot_dtype is not None:
                    a, b = a.to(self.dot_dtype).to(a.dtype), b.to(self.dot_dtype).to(b.dtype)
                t, u, op = a * b, ua | ub, "rsum"
            if k not in labs:
                raise EvalError(f"reduction over {k} of a value that does not vary along it")
            axis = labs.index(k)
            shape = [self.sizes[l] for l in labs]
            t, u = (t.expand(shape), u.expand(shape)) if labs else (t, u)
            rest = [l for l in labs if l != k]
            ur = u.any(axis)
            if op == "rsum":
                return t.sum(axis), rest, ur
            if t.shape[axis] == 0:
                shape = [s for i, s in enumerate(t.shape) if i != axis]
                inf = float("-inf") if op == "rmax" else float("inf")
                return torch.full(shape, inf, dtype=f64), rest, ur
            return (t.amax(axis) if op == "rmax" else t.amin(axis)), rest, ur
        raise EvalError(f"unknown node {kind}")


def _align2(vals):
    """Aligns (tensor, labels, uncertain) triples: the tensors, then the masks, and the layout."""
    layout = []
    for _, labs, _ in vals:
        layout = _union(layout, labs)
    ts = [_to_layout(t, labs, layout) for t, labs, _ in vals]
    us = [_to_layout(u, labs, layout) for _, labs, u in vals]
    return ts + us, layout


DTYPES = {"float32": torch.float32, "float16": torch.float16}


INT_DTYPES = [torch.int64, torch.int64, torch.int64, torch.int32, torch.int16, torch.uint8]


def make_case_inputs(case):
    """The case's inputs (in its dtype) and scalars, from its seed. Integer inputs of a range
    `int(y)` hold positions along y, mostly inside 0 .. len(y) - 1, some outside (they read 0);
    other integer inputs and SIn ints hold small whole numbers of either sign. A scalar with a
    value in the program (`SIn eps = 1e-6;`) is passed that value."""
    prog = case.program
    g = torch.Generator().manual_seed(case.seed)
    shapes = input_shapes(prog, case.sizes)
    inputs = {n: torch.randn(shapes[n], generator=g).to(DTYPES[case.dtype])
              for n in prog.inputs if n not in prog.ints}
    scalars = {s: 0.5 + float(torch.rand((), generator=g)) for s in prog.sins
               if s not in prog.sin_ints and s not in prog.sin_values}
    gi = torch.Generator().manual_seed(case.seed + 7919)
    rng = random.Random(case.seed)
    for n in prog.inputs:
        if n not in prog.ints:
            continue
        dtype = rng.choice(INT_DTYPES)
        r = prog.ints[n]
        if r:
            size = case.sizes.get(r, 0)
            t = torch.randint(0, max(size, 1), shapes[n], generator=gi)
            if rng.random() < 0.6:           # some positions outside 0 .. len(r) - 1
                bad = torch.tensor([-1, size, size + 3, -7, 1000])
                pick = torch.randint(0, len(bad), shapes[n], generator=gi)
                mask = torch.rand(shapes[n], generator=gi) < 0.3
                t = torch.where(mask, bad[pick], t)
        else:
            t = torch.randint(-8, 16, shapes[n], generator=gi)
        if dtype == torch.uint8:
            t = t.clamp(0, 255)
        inputs[n] = t.to(dtype)
    for sname in prog.sins:
        if sname in prog.sin_values:
            v = prog.sin_values[sname]
            scalars[sname] = int(v) if sname in prog.sin_ints else float(v)
        elif sname in prog.sin_ints:
            scalars[sname] = int(torch.randint(-6, 16, (), generator=gi))
    inputs = {n: inputs[n] for n in prog.inputs}
    scalars = {s: scalars[s] for s in prog.sins}
    return inputs, scalars


def evaluate(case, funcs=None, perturb=None, dtype=torch.float64, dot_dtype=None):
    """Expected values of `funcs` (default: the compiled Funcs) in float64, and the evaluator.
    With dtype=torch.float32 every intermediate is rounded as a float32 kernel would; with
    dot_dtype, rdot's operands are rounded to it first (a float16 or bfloat16 kernel's tl.dot
    takes operands computed in the kernel in the inputs' dtype: docs/language.md)."""
    inputs, scalars = make_case_inputs(case)
    ints = case.program.ints
    inputs = {n: t.to(torch.int64 if n in ints else dtype) for n, t in inputs.items()}
    if perturb is not None:
        g = torch.Generator().manual_seed(perturb)
        inputs = {n: t if n in ints else
                  t * (1 + 1e-6 * torch.randn(t.shape, generator=g, dtype=torch.float64))
                  for n, t in inputs.items()}
        scalars = {s: v if s in case.program.sin_ints else
                   v * (1 + 1e-6 * float(torch.randn((), generator=g)))
                   for s, v in scalars.items()}
    ev = Evaluator(case.program, case.sizes, inputs, scalars, dtype, dot_dtype)
    out = {f: ev.func(f).double() for f in (funcs or case.program.compiled)}
    return out, ev


# ------------------------------------------------------------------------------------------------
# Program generator.

class Gen:
    def __init__(self, rng, wild=False, avoid=()):
        self.rng = rng
        self.wild = wild
        self.used_wild = False
        self.avoid = set(avoid)       # constructs of known, open bugs (AVOIDABLE)

    def program(self):
        rng = self.rng
        if rng.random() < ONLINE_RATE:
            return self.online_chain()
        n_labels = rng.randint(2, 5)
        names = rng.sample(LABEL_POOL, n_labels)
        labels = {n: ("RVar" if rng.random() < 0.55 else "Var") for n in names}
        if rng.random() < 0.9 and "RVar" not in labels.values():
            labels[names[-1]] = "RVar"
        inputs = {}
        for i in range(rng.randint(1, 3)):
            rank = rng.randint(1, min(3, n_labels))
            inputs[f"I{i}"] = rng.sample(names, rank)
        ints = {}
        if rng.random() < 0.3:
            # integer inputs: positions along a label (a gather's index), or plain whole numbers
            for i in range(rng.choice([1, 1, 2])):
                inputs[f"T{i}"] = rng.sample(names, rng.randint(1, min(2, n_labels)))
                ints[f"T{i}"] = rng.choice(names) if rng.random() < 0.7 else ""
        sins = [f"s{i}" for i in range(rng.choice([0, 0, 1, 1, 2]))]
        sin_values = {s: rng.choice(["1e-6", "0.5", "1.25", "3", "1e-2", "2.5e+0"])
                      for s in sins if rng.random() < 0.25}
        sin_ints = []
        if rng.random() < 0.25:
            sin_ints = ["n0"]
            if rng.random() < 0.4:
                sin_values["n0"] = rng.choice(["-3", "0", "5", "-100", "2"])
        self.prog = Program(labels, inputs, sins + sin_ints, [], [], ints, sin_ints, sin_values)
        n_funcs = rng.choice([1, 1, 2, 2, 2, 3, 3, 4])
        for i in range(n_funcs):
            name = f"f{i}"
            dims = rng.sample(names, rng.randint(1, min(3, n_labels)))
            rv = self.rvars()
            if i == n_funcs - 1 and rv and n_labels >= 3 and rng.random() < 0.2:
                # a matrix product in some label order (tl.dot when scheduled for it)
                k = rng.choice(rv)
                dims = rng.sample([l for l in names if l != k], 2)
                e = self.matmul(dims)
            elif rng.random() < 0.01:
                e = self.long_sum(dims)
            else:
                e = self.expr(dims, rng.choice([1, 2, 2, 3, 3, 4]))
            if self.prog.funcs and rng.random() < 0.7 and not any(
                    r == self.prog.funcs[-1][0] for r in reads(e)):
                prev = self.func_access(self.prog.funcs[-1], dims)
                if prev is not None:
                    e = ["bin", rng.choice(["+", "*", "-"]), e, prev]
            self.prog.funcs.append([name, dims, e])
        self.prog.compiled = [self.prog.funcs[-1][0]]
        if len(self.prog.funcs) > 1 and rng.random() < 0.15:
            self.prog.compiled.insert(0, rng.choice(self.prog.funcs[:-1])[0])
        if rng.random() < 0.1:
            self.prog = risky_names(self.prog, rng)
        return self.prog

    # -- leaves
    def pick_labels(self, home, allowed, must=None):
        rng = self.rng
        rank = len(home)
        if rank > len(allowed) or (must is not None and must not in allowed):
            return None
        if all(h in allowed for h in home) and (must is None or must in home) \
                and rng.random() < 0.6:
            labs = list(home)
            if rng.random() < 0.25:
                rng.shuffle(labs)
            return labs
        pool = [l for l in allowed if l != must]
        labs = rng.sample(pool, rank - (1 if must is not None else 0))
        if must is not None:
            labs.insert(rng.randrange(rank), must)
        return labs

    def func_access(self, f, allowed, must=None):
        labs = self.pick_labels(f[1], allowed, must)
        return None if labs is None else ["acc", f[0], labs]

    def access(self, allowed, must=None, ints=True):
        rng = self.rng
        cands = [("I", n, h) for n, h in self.prog.inputs.items()
                 if ints or n not in self.prog.ints]
        cands += [("F", f[0], f[1]) for f in self.prog.funcs] * 2
        rng.shuffle(cands)
        for kind, name, home in cands:
            labs = self.pick_labels(home, allowed, must)
            if labs is not None:
                if kind == "I" and rng.random() < 0.3:
                    a = self.computed_access(name, labs, allowed)
                    if must is None or must in expr_labels(a, self.prog):
                        return a
                return ["acc", name, labs]
        return None

    # -- whole numbers and positions
    def int_access(self, allowed, ranged=None):
        """A read of an integer input (of range `ranged` when given) within `allowed`."""
        cands = [n for n, r in self.prog.ints.items() if ranged is None or r == ranged]
        self.rng.shuffle(cands)
        for n in cands:
            labs = self.pick_labels(self.prog.inputs[n], allowed)
            if labs is not None:
                return ["acc", n, labs]
        return None

    def constant(self, label=None):
        """A whole number that does not vary: a shift's distance."""
        rng = self.rng
        r = rng.random()
        if r < 0.45:
            return ["num", str(rng.randint(1, 5))]
        if r < 0.6:
            return ["neg", ["num", str(rng.randint(1, 3))]]
        if r < 0.75:
            return ["len", label or rng.choice(list(self.prog.labels))]
        if r < 0.9 and label:
            return ["bin", "//", ["len", label], ["num", "2"]]
        if self.prog.sin_ints:
            return ["sin", rng.choice(self.prog.sin_ints)]
        return ["num", "1"]

    def computed_access(self, name, labs, allowed):
        """An access of input `name` with one computed position where `labs` has label L: a
        shift of L, a gather through an integer input of range L, or any other whole number
        (read beside a plain access, which names the dimension's extent)."""
        rng = self.rng
        pos = list(labs)
        i = rng.randrange(len(pos))
        L = pos[i]
        r = rng.random()
        if r < 0.45:
            c = self.constant(L)
            pos[i] = rng.choice([["bin", "+", ["lab", L], c], ["bin", "-", ["lab", L], c],
                                 ["bin", "+", c, ["lab", L]]])
            return ["acc", name, pos]
        if r < 0.75:
            t = self.int_access(allowed, ranged=L)
            if t is None and len(self.prog.ints) < 3:
                # an index input of range L, home labels among the allowed ones
                home = rng.sample(list(allowed), rng.randint(1, min(2, len(allowed))))
                tname = next(f"T{k}" for k in range(9) if f"T{k}" not in self.prog.inputs)
                self.prog.inputs[tname] = home
                self.prog.ints[tname] = L
                t = ["acc", tname, list(home)]
            if t is not None:
                pos[i] = t if rng.random() < 0.7 else ["bin", "+", t, self.constant()]
                return ["acc", name, pos]
        general = [["num", "0"], ["bin", "*", ["lab", L], ["num", "2"]],
                   ["bin", "//", ["lab", L], ["num", "2"]],
                   ["bin", "-", ["len", L], ["bin", "+", ["lab", L], ["num", "1"]]],
                   ["bin", "%", ["bin", "+", ["lab", L], ["num", "3"]],
                    ["bin", "+", ["len", L], ["num", "1"]]]]
        general.append(["bin", "-", ["len", L], ["num", "1"]])       # the last element
        if self.prog.sin_ints:
            general.append(["sin", rng.choice(self.prog.sin_ints)])  # anywhere, or outside
        t = self.int_access(allowed, ranged="")
        if t is not None:
            general.append(t)
        pos[i] = rng.choice(general)
        return ["bin", rng.choice("+-*"), ["acc", name, list(labs)], ["acc", name, pos]]

    def divisor(self):
        rng = self.rng
        r = rng.random()
        if r < 0.55:
            return ["num", str(rng.randint(1, 7))]
        if r < 0.8:
            return ["neg", ["num", str(rng.randint(1, 5))]]
        return ["bin", "+", ["len", rng.choice(list(self.prog.labels))], ["num", "1"]]

    def wleaf(self, allowed):
        rng = self.rng
        r = rng.random()
        if r < 0.45 and allowed:
            return ["lab", rng.choice(list(allowed))]
        if r < 0.6 and allowed:
            return ["len", rng.choice(list(allowed))]
        if r < 0.75:
            t = self.int_access(allowed)
            if t is not None:
                return t
        if r < 0.85 and self.prog.sin_ints:
            return ["sin", rng.choice(self.prog.sin_ints)]
        return ["num", str(rng.choice([0, 1, 2, 3, 5, 7, 9]))]

    def wexpr(self, allowed, depth):
        """A whole number: labels' values, sizes, integer inputs, `//` and `%` (either sign)."""
        rng = self.rng
        r = rng.random()
        if depth <= 0 or r < 0.2:
            return self.wleaf(allowed)
        d = depth - 1
        w = lambda: self.wexpr(allowed, d)  # noqa: E731
        if r < 0.45:
            e = ["bin", rng.choice("+-*"), w(), w()]
        elif r < 0.62:
            e = ["bin", "//", w(), self.divisor()]
        elif r < 0.78:
            e = ["bin", "%", w(), self.divisor()]
        elif r < 0.84:
            e = ["neg", w()]
        elif r < 0.92:
            e = ["call", rng.choice(["maximum", "minimum"]), [w(), w()]]
        else:
            e = ["call", "where", [["bin", rng.choice(CMP_OPS), w(), w()], w(), w()]]
        # literals alone make a number (`2 + 3`): keep it whole
        return e if is_whole(e, self.prog) else self.wleaf(allowed)

    def whole_use(self, allowed, d):
        """A whole number where a number is wanted: alone, scaling a value, or a mask."""
        rng = self.rng
        r = rng.random()
        if r < 0.3:
            return self.wexpr(allowed, rng.randint(1, 2))
        if r < 0.55:
            return ["bin", rng.choice("*+-"), self.expr(allowed, d), self.wexpr(allowed, 2)]
        if r < 0.65:
            return ["bin", "/", self.expr(allowed, d),
                    ["bin", "+", ["num", "1"], ["call", "abs", [self.wexpr(allowed, 1)]]]]
        # a mask: where(l <= m, a, -inf), the causal mask
        cond = ["bin", rng.choice(CMP_OPS), self.wexpr(allowed, rng.randint(0, 1)),
                self.wexpr(allowed, rng.randint(0, 1))]
        other = self.expr(allowed, d)
        if rng.random() < 0.3:
            self.used_wild = True
            other = rng.choice([["neg", ["num", "inf"]], ["num", "inf"]])
        elif rng.random() < 0.3:
            other = ["num", "0"]
        args = [cond, self.expr(allowed, d), other]
        if rng.random() < 0.5:
            args[1], args[2] = args[2], args[1]
        return ["call", "where", args]

    def literal(self):
        rng = self.rng
        return ["num", rng.choice(["0.5", "2", "1", "3", "0.25", "1.5", "0.75", "2.5", "1e-1",
                                   "4.", ".5", "1E+1", "0"])]

    def leaf(self, allowed):
        rng = self.rng
        r = rng.random()
        if r < 0.78:
            a = self.access(allowed)
            if a is not None:
                return a
        if r < 0.86 and self.prog.sins:
            return ["sin", rng.choice(self.prog.sins)]
        if r < 0.88 and allowed:
            return ["lab", rng.choice(list(allowed))]
        if r < 0.9 and allowed:
            if "len-unused" in self.avoid:
                return ["len", rng.choice(list(allowed))]
            return ["len", rng.choice(list(self.prog.labels))]
        return self.literal()

    # -- compound
    def tame(self, e):
        """A positive, bounded-away-from-zero function of e."""
        rng = self.rng
        r = rng.random()
        if r < 0.5:
            return ["bin", "+", ["num", "1"], ["bin", "*", e, e]]
        if r < 0.8:
            return ["call", "exp", [["call", "tanh", [e]]]]
        return ["bin", "+", ["num", "1.5"], ["call", "sin", [e]]]

    def expr(self, allowed, depth):
        rng = self.rng
        if depth <= 0:
            return self.leaf(allowed)
        r = rng.random()
        d = depth - 1
        if r < 0.12:
            return self.leaf(allowed)
        if r < 0.17:
            return ["neg", self.expr(allowed, d)]
        if r < 0.45:
            return ["bin", rng.choice("+-*"), self.expr(allowed, d), self.expr(allowed, d)]
        if r < 0.52:
            if self.wild and rng.random() < 0.2:
                self.used_wild = True
                return ["bin", "/", self.expr(allowed, d), self.literal()]
            return ["bin", "/", self.expr(allowed, d), self.tame(self.expr(allowed, d))]
        if r < 0.54:
            return ["bin", "%", self.expr(allowed, d), ["num", rng.choice(["1.5", "2", "0.75"])]]
        if r < 0.58:
            cmp = ["bin", rng.choice(CMP_OPS), self.expr(allowed, d), self.expr(allowed, d)]
            if "bool-arith" in self.avoid:
                return ["call", "where", [cmp, self.expr(allowed, d), self.expr(allowed, d)]]
            return cmp
        if r < 0.66:
            return self.call(allowed, d)
        if r < 0.76:
            return self.whole_use(allowed, d)
        if r < 0.92:
            e = self.reduction(allowed, d)
            return e if e is not None else self.leaf(allowed)
        e = self.dot(allowed, d)
        return e if e is not None else self.leaf(allowed)

    def call(self, allowed, d):
        rng = self.rng
        name = rng.choice(list(ARITY))
        sub = lambda: self.expr(allowed, d)  # noqa: E731
        if name in ("log", "log2", "log10", "sqrt", "sqrt_rn", "rsqrt", "reciprocal"):
            return ["call", name, [self.tame(sub())]]
        if name == "log1p":
            return ["call", name, [["bin", "*", (x := sub()), x]]]
        if name in ("exp", "exp2", "sinh", "cosh", "expm1"):
            arg = (["call", "clamp", [sub(), ["num", "-4"], ["num", "4"]]]
                   if rng.random() < 0.5 else ["call", "tanh", [sub()]])
            return ["call", name, [arg]]
        if name == "tan":
            return ["call", name, [["bin", "*", ["num", "0.5"], ["call", "tanh", [sub()]]]]]
        if name in ("fdiv", "div_rn"):
            return ["call", name, [sub(), self.tame(sub())]]
        if name == "pow":
            if self.wild and rng.random() < 0.3:
                self.used_wild = True
                return ["call", "pow", [sub(), ["num", rng.choice(["0.5", "2.5", "1.5"])]]]
            if rng.random() < 0.5:
                e = rng.choice(["2", "3", "1", "2.0", "0"]) if rng.random() < 0.8 else "-1"
                base = sub() if e != "-1" else self.tame(sub())
                return ["call", "pow", [base, ["num", e]]]
            base = self.tame(sub())
            exp = rng.choice([["num", rng.choice(["0.5", "2.5", "-0.5", "1.5", "-2"])],
                              ["call", "tanh", [sub()]]]
                             + ([["sin", rng.choice(self.prog.sins)]] if self.prog.sins else []))
            return ["call", "pow", [base, exp]]
        if name == "clamp":
            if rng.random() < 0.5:
                return ["call", name, [sub(), ["num", "-1"], ["num", "0.5"]]]
            return ["call", name, [sub(), sub(), sub()]]
        if name == "where":
            cond = ["bin", rng.choice(CMP_OPS), sub(), sub()] if rng.random() < 0.7 else sub()
            return ["call", name, [cond, sub(), sub()]]
        return ["call", name, [sub() for _ in range(ARITY[name])]]

    def rvars(self):
        return [l for l, k in self.prog.labels.items() if k == "RVar"]

    def force(self, e, allowed, k):
        """e, made to vary along k (times or plus an access that does)."""
        if k in expr_labels(e, self.prog):
            return e
        a = self.access(_union(allowed, [k]), must=k)
        if a is None:
            return None
        return ["bin", self.rng.choice(["*", "+"]), e, a]

    def reduction(self, allowed, d):
        rvars = self.rvars()
        if not rvars:
            return None
        k = self.rng.choice(rvars)
        inner = _union(allowed, [k])
        e = self.force(self.expr(inner, d), inner, k)
        if e is None:
            return None
        return ["red", self.rng.choice(["rsum", "rsum", "rmax", "rmin"]), e, k]

    def dot(self, allowed, d):
        rvars = self.rvars()
        if not rvars:
            return None
        k = self.rng.choice(rvars)
        inner = _union(allowed, [k])
        if self.rng.random() < 0.5:
            a, b = self.access(inner, must=k), self.access(inner, must=k)
        else:
            a = self.force(self.expr(inner, d), inner, k)
            b = self.force(self.expr(inner, d), inner, k)
        if a is None or b is None:
            return None
        return ["dot", a, b, k]

    def matmul(self, dims):
        """rdot of two rank-2 operands in any label order, when dims has two labels."""
        rng = self.rng
        rvars = [r for r in self.rvars() if r not in dims]
        if len(dims) != 2 or not rvars:
            return self.expr(dims, 2)
        k = rng.choice(rvars)
        m, n = dims if rng.random() < 0.5 else dims[::-1]
        ops = []
        for pair in ([m, k], [k, n]):
            rng.shuffle(pair)
            name = f"I{len(self.prog.inputs)}"
            self.prog.inputs[name] = list(pair)
            ops.append(["acc", name, list(pair)])
        if rng.random() < 0.5:
            ops.reverse()
        e = ["dot", ops[0], ops[1], k]
        if rng.random() < 0.3:
            e = ["bin", rng.choice("+*"), e, self.expr(dims, 1)]
        return e

    def long_sum(self, dims):
        e = self.leaf(dims)
        for _ in range(self.rng.randint(150, 260)):
            e = ["bin", "+", e, self.leaf(dims)]
        return e

    def online_chain(self):
        """A softmax over an RVar feeding a sum or a product, written the stable way in Funcs of
        their own (`o_max`, `o_exp`, `o_sum`, `o_out`: gen_schedule fuses them into `o_out` and
        asks for `online(l)`); sometimes with a second, unrescaled sum beside it, or the
        maximum read again outside the sums, as a log-sum-exp is."""
        rng = self.rng
        attention = ATTENTION_RATE > 0 and rng.random() < ATTENTION_RATE
        names = rng.sample(LABEL_POOL, rng.randint(3 if attention else 2, 4))
        l = names[-1]
        outer = names[:rng.randint(1, len(names) - 1)]
        labels = {n: "Var" for n in names}
        labels[l] = "RVar"
        inputs = {"I0": outer + [l]}
        if rng.random() < 0.5:
            inputs["I1"] = rng.sample(outer + [l], rng.randint(1, len(outer) + 1))
        self.prog = Program(labels, inputs, [f"s{i}" for i in range(rng.choice([0, 1]))], [], [])
        inner = outer + [l]
        # Scores, weights, ...: no reduction over l inside (that is another form), mostly.
        def free(depth):
            for _ in range(8):
                e = self.expr(inner, depth)
                if rng.random() < 0.05 or not any(n[0] in ("red", "dot") for n in walk(e)):
                    return e
            return ["acc", "I0", list(inner)]
        scores = self.force(free(rng.choice([0, 1, 2])), inner, l) or ["acc", "I0", list(inner)]
        spare = [x for x in LABEL_POOL if x not in names]
        if (attention or rng.random() < 0.3) and spare:
            # FlashAttention's scores: a product of queries and keys over a label of its own,
            # scaled (the form whose online loop Hopper runs in Gluon, kir/OnlinePartitions.h).
            k = rng.choice(spare)
            labels[k] = "RVar"
            self.prog.labels[k] = "RVar"
            q, key = f"I{len(self.prog.inputs)}", f"I{len(self.prog.inputs) + 1}"
            self.prog.inputs[q] = outer + [k]
            self.prog.inputs[key] = [l, k]
            scores = ["dot", ["acc", q, outer + [k]], ["acc", key, [l, k]], k]
            if rng.random() < 0.7:
                scores = ["bin", "/", scores, ["call", "sqrt", [["len", k]]]]
        # Drawn before the chain's Funcs exist, so that they read inputs (mostly).
        weight, other = free(rng.choice([0, 1])), free(1)
        mx = ["acc", "o_max", list(outer)]
        self.prog.funcs.append(["o_max", list(outer), ["red", "rmax", scores, l]])
        self.prog.funcs.append(["o_exp", list(inner),
                                ["call", "exp", [["bin", "-", scores, mx]]]])
        ex = ["acc", "o_exp", list(inner)]
        self.prog.funcs.append(["o_sum", list(outer), ["red", "rsum", ex, l]])
        total = ["acc", "o_sum", list(outer)]
        r = 0.0 if attention else rng.random()
        n = [x for x in names if x not in inner]
        if r < 0.35 and n:
            # attention: a product with values along another label
            v = f"I{len(self.prog.inputs)}"
            self.prog.inputs[v] = [l, n[0]]
            dims = outer + [n[0]]
            body = ["dot", ["bin", "/", ex, total], ["acc", v, [l, n[0]]], l]
        elif r < 0.6:
            # a weighted mean over the softmax
            dims = list(outer)
            body = ["bin", "/", ["red", "rsum", ["bin", "*", ex, weight], l], total]
        elif r < 0.8:
            # log-sum-exp minus a sum that does not read the maximum (cross-entropy's shape)
            dims = list(outer)
            body = ["bin", "-", ["bin", "+", ["call", "log", [total]], mx],
                    ["red", "rsum", other, l]]
        else:
            dims = list(outer)
            body = ["bin", "*", total, ["red", "rmin", other, l]]
        self.prog.funcs.append(["o_out", dims, body])
        self.prog.compiled = ["o_out"]
        return self.prog


# ------------------------------------------------------------------------------------------------
# Schedule generator.

BLOCKS = [1, 2, 3, 4, 5, 7, 8, 16]
POW2 = [1, 2, 4, 8, 16]
SPLIT_IDS = ["xi", "yi", "q", "lo", "hi", "part"]


# Names that the generated Python must rename: keywords, builtins, module-level names, names
# derived from other symbols (docs/language.md, "Names in the generated Python").
RISKY = {"label": ["type", "id", "pid", "grid", "match", "x_size", "lambda_"],
         "In": ["sum", "lambda", "tl", "torch", "math", "f0_ptr", "SCHEDULE"],
         "SIn": ["max", "input", "os", "triton"],
         "Func": ["reference", "make_inputs", "dtype", "device", "range", "I0_kernel"]}


def risky_names(prog, rng):
    """The program with some symbols renamed to names the generated Python must rename."""
    m = {}
    for kind, names in (("label", list(prog.labels)), ("In", list(prog.inputs)),
                        ("SIn", list(prog.sins)), ("Func", [f[0] for f in prog.funcs])):
        pool = [n for n in RISKY[kind] if n not in m.values()]
        rng.shuffle(pool)
        for n in names:
            if pool and rng.random() < 0.5:
                m[n] = pool.pop()
    if not m:
        return prog

    def ren(e):
        kind = e[0]
        if kind in ("acc", "sin", "len", "lab"):
            e = list(e)
            e[1] = m.get(e[1], e[1])
        if kind == "acc":
            e[2] = [m.get(p, p) if isinstance(p, str) else ren(p) for p in e[2]]
            return e
        if kind in ("red", "dot"):
            e = list(e)
            e[-1] = m.get(e[-1], e[-1])
        if kind == "neg":
            return ["neg", ren(e[1])]
        if kind == "bin":
            return ["bin", e[1], ren(e[2]), ren(e[3])]
        if kind == "call":
            return ["call", e[1], [ren(a) for a in e[2]]]
        if kind == "red":
            return ["red", e[1], ren(e[2]), e[3]]
        if kind == "dot":
            return ["dot", ren(e[1]), ren(e[2]), e[3]]
        return e

    return Program({m.get(l, l): k for l, k in prog.labels.items()},
                   {m.get(n, n): [m.get(l, l) for l in h] for n, h in prog.inputs.items()},
                   [m.get(n, n) for n in prog.sins],
                   [[m.get(f, f), [m.get(l, l) for l in d], ren(e)] for f, d, e in prog.funcs],
                   [m.get(c, c) for c in prog.compiled],
                   {m.get(n, n): m.get(r, r) for n, r in prog.ints.items()},
                   [m.get(n, n) for n in prog.sin_ints],
                   {m.get(n, n): v for n, v in prog.sin_values.items()})


def reduced_rvars(e, prog):
    """RVars that `e` reduces over, outermost first."""
    out = []
    for n in walk(e):
        if n[0] in ("red", "dot") and n[-1] not in out:
            out.append(n[-1])
    return out


def has_dot(e):
    return any(n[0] == "dot" for n in walk(e))


def dot_input_operands(prog, e):
    """The 2-D inputs read directly as an operand of a product in `e`."""
    found = []
    for n in walk(e):
        if n[0] == "dot":
            for a in n[1:3]:
                if (a[0] == "acc" and a[1] in prog.inputs and a[1] not in prog.ints
                        and len(a[2]) == 2 and a[1] not in found):
                    found.append(a[1])
    return found


def gen_schedule(rng, prog, sizes, budget=96):
    """Random schedule statements for the compiled Funcs and the Funcs they read."""
    if ATTENTION_RATE > 0 and is_attention(prog) and rng.random() < ATTENTION_RATE:
        return attention_schedule(rng, prog)
    kernel_funcs = []
    for c in prog.compiled:
        for f in [c] + func_deps(prog, c):
            if f not in kernel_funcs:
                kernel_funcs.append(f)
    statements = []
    fused = {}                                   # f -> (g, label)
    split = set()                                # Funcs whose reduction is split or atomic
    # Fusions: a producer into one of its consumers, at a label the docs allow (usually).
    for g in kernel_funcs:
        for f in dict.fromkeys(r for r in reads(prog.func(g)[2]) if prog.func(r) is not None):
            if f in fused or f in prog.compiled or rng.random() > 0.35:
                continue
            fd, gd = prog.func(f)[1], prog.func(g)[1]
            legal = [v for i, v in enumerate(fd) if v in gd and gd.index(v) == i
                     and fd[:i] == gd[:i]]
            common = [v for v in fd if v in gd]
            # Mostly fusions the docs allow; now and then one they do not (a diagnostic).
            pool = legal if (legal and rng.random() < 0.9) else \
                common if rng.random() < 0.15 else []
            if pool:
                v = rng.choice(pool)
                fused[f] = (g, v)
                statements.append(f"{f}.fuse_at({g}, {v})")
    for f in kernel_funcs:
        name, dims, e = prog.func(f)
        if f in fused and rng.random() < 0.85:
            continue
        red = [k for k in reduced_rvars(e, prog) if k not in dims]
        extra = []
        for h, (g, _) in fused.items():
            if g == f:
                hd, he = prog.func(h)[1], prog.func(h)[2]
                extra += [l for l in hd + reduced_rvars(he, prog)]
        labels = list(dict.fromkeys(dims + red + extra))
        block, tensor = {}, {}
        dot_sched = has_dot(e) and rng.random() < 0.5
        for d in dims:
            if rng.random() < 0.5:
                block[d] = rng.choice([16, 32] if dot_sched else BLOCKS)
        single = e[0] in ("red", "dot") and e[-1] not in dims
        if single and rng.random() < 0.25 and e[-1] not in block:
            k = e[-1]
            split.add(f)
            block[k] = rng.choice([16, 32] if dot_sched else [2, 3, 4, 8, 16])
            if rng.random() < 0.5:
                statements.append(f"{f}.atomic({k})")
        for l in labels:
            r = rng.random()
            b = block.get(l)
            if dot_sched:
                tensor[l] = 0 if r < 0.5 else (16 if b is None or b >= 16 else 0)
            elif r < 0.35:
                tensor[l] = 0
            elif r < 0.8:
                tensor[l] = rng.choice([p for p in POW2 if b is None or p <= b])
        # Now and then tiles a descriptor can store (16 or 32 wide, whole blocks), so that the
        # Func's own store through one (`tma(f)`, below) runs rather than being refused.
        store_tiles = len(dims) == 2 and rng.random() < 0.12
        if store_tiles:
            for d in dims:
                block[d] = rng.choice([16, 32])
                tensor[d] = rng.choice([0, block[d]])
        # Keep the interpreter fast: tensorize from the inside out while too slow.
        def cost():
            total = 1
            for l in labels:
                n = max(sizes.get(l, 1), 1)
                b = block.get(l)
                blocks, extent = (1, n) if b is None else (math.ceil(n / b), min(b, n))
                t = tensor.get(l, 1)
                t = extent if t == 0 else t
                total *= blocks * math.ceil(extent / t)
            return total
        for l in reversed(labels):
            if cost() <= budget:
                break
            tensor[l] = 0
        for l in reversed(labels):
            if cost() <= budget:
                break
            if l in block and l in dims:
                del block[l]
        if block:
            statements += _grouped(rng, f, "block", block)
            if rng.random() < 0.5:
                statements.append(f"{f}.map({', '.join(random_map(rng, list(block)))})")
            if any(l in dims for l in block) and rng.random() < 0.25:
                flatten = ", flatten" if rng.random() < 0.3 else ""
                statements.append(f"{f}.persistent({rng.choice(['interleaved', 'blocked'])}{flatten})")
        tensor = {l: t for l, t in tensor.items() if t != 1 or rng.random() < 0.2}
        if tensor:
            statements += _grouped(rng, f, "tensorize", tensor)
        if has_dot(e) and rng.random() < 0.3:
            statements.append(f"{f}.precision({rng.choice(['tf32', 'tf32x3', 'ieee'])})")
        operands = dot_input_operands(prog, e)
        if operands and rng.random() < 0.3:
            # Mostly the product's 2-D input operands; `tma-unused` or `tma-split` where the
            # schedule keeps them from descriptors (rejections, counted as such). The Func
            # itself too, sometimes: its result tiles stored through a descriptor.
            named = rng.sample(operands, rng.randint(1, len(operands)))
            statements.append(f"{f}.tma({', '.join(named + ([f] if rng.random() < 0.4 else []))})")
            if f in statements[-1].split("(")[1] and rng.random() < 0.4:
                statements.append(f"{f}.subtile({dims[-1]}:{rng.choice([2, 2, 4])})")
            if rng.random() < 0.5:
                # The loop of a product over its label: at 4 warps mostly (the only count it
                # takes); rejected with a reason where its operands or its loop do not qualify.
                # On Hopper a Gluon kernel: its epilogue on the whole tile or in chunks of
                # rows of the first dimension, at 4 or 8 warps.
                ks = [n[3] for n in walk(e) if n[0] == "dot"]
                rows = f", {dims[0]}:{rng.choice([8, 16, 32, 64])}" if rng.random() < 0.4 else ""
                statements.append(f"{f}.warp_specialize({rng.choice(ks)}{rows})")
                if rng.random() < 0.8:
                    statements.append(f"{f}.num_warps({rng.choice([4, 4, 8])})")
        elif len(dims) == 2 and rng.random() < (0.7 if store_tiles else 0.05):
            # Any Func of two dimensions may store its tiles through a descriptor; refused with
            # the reason where its tiles do not make a descriptor's block.
            statements.append(f"{f}.tma({f})")
            if rng.random() < 0.4:
                statements.append(f"{f}.subtile({dims[-1]}:{rng.choice([2, 4])})")
        if rng.random() < 0.2 and not any(st.startswith(f"{f}.num_warps(") for st in statements):
            statements.append(f"{f}.num_warps({rng.choice([1, 2, 4, 8, 16, 32])})")
        if rng.random() < 0.2:
            statements.append(f"{f}.num_stages({rng.randint(1, 16)})")
    statements += gen_stores(rng, prog, fused, split)
    statements += online_statements(rng, prog, statements, fused)
    rng.shuffle(statements)
    return statements


def online_statements(rng, prog, statements, fused):
    """For a softmax chain (Gen.online_chain): mostly every Func of it fused into `o_out` and
    `o_out.online(l)` with l in tiles; now and then online without the fusions (a diagnostic)."""
    if prog.func("o_max") is None or prog.func("o_out") is None:
        return []
    l = prog.func("o_max")[2][3]
    at = prog.func("o_max")[1][-1]
    out = []
    if rng.random() < 0.9:
        for f in ("o_max", "o_exp", "o_sum"):
            if f not in fused and any(f == r or f in func_deps(prog, r)
                                      for r in reads(prog.func("o_out")[2])
                                      if prog.func(r) is not None):
                out.append(f"{f}.fuse_at(o_out, {at})")
    out.append(f"o_out.online({l})")
    if rng.random() < 0.7 and not any(st.startswith("o_out.tensorize(") for st in statements):
        out.append(f"o_out.tensorize({l}:{rng.choice([1, 2, 4, 8, 16])})")
    if rng.random() < 0.2 and prog.func("o_out")[2][0] == "dot":
        # The online loop warp-specialized (on Hopper its Gluon form, kir/OnlinePartitions.h),
        # the inputs through descriptors: printed and, with --hopper, compiled for sm_90.
        operands = chain_operands(prog)
        if operands and not any(st.startswith("o_out.tma(") for st in statements):
            out.append(f"o_out.tma({', '.join(operands)})")
        out.append(f"o_out.warp_specialize({l})")
        out += gluon_shape(rng, prog, statements, l)
    return out


def chain_operands(prog):
    """The inputs the softmax chain's products read directly: what `o_out.tma` can take."""
    chain = [prog.func(f)[2] for f in ("o_max", "o_exp", "o_sum", "o_out")]
    operands = []
    for n in (n for e in chain for n in walk(e) if n[0] == "dot"):
        for a in n[1:3]:
            if (a[0] == "acc" and a[1] in prog.inputs and a[1] not in prog.ints
                    and len(a[2]) >= 2 and a[1] not in operands):
                operands.append(a[1])
    return operands


def is_attention(prog):
    """A softmax chain whose scores are a product and whose output multiplies the
    probabilities by values: FlashAttention's shape."""
    if prog.func("o_max") is None or prog.func("o_out") is None:
        return False
    return (prog.func("o_out")[2][0] == "dot"
            and any(n[0] == "dot" for n in walk(prog.func("o_max")[2])))


def attention_schedule(rng, prog):
    """FlashAttention as its templates schedule it, and nothing else: the chain fused into
    `o_out`, online, its inputs (and half the time its output) through descriptors,
    warp-specialized in the Gluon form's
    blocks (gluon_shape), the row labels' blocks in a random order (`map`)."""
    l = prog.func("o_max")[2][3]
    at = prog.func("o_max")[1][-1]
    out = [f"{f}.fuse_at(o_out, {at})" for f in ("o_max", "o_exp", "o_sum")]
    out.append(f"o_out.online({l})")
    operands = chain_operands(prog)
    if operands and rng.random() < 0.5:  # the output too: stored through the query buffer
        operands = operands + ["o_out"]
    if operands:
        out.append(f"o_out.tma({', '.join(operands)})")
    out.append(f"o_out.warp_specialize({l})")
    out += gluon_shape(rng, prog, out, l, always=True)
    rows = list(prog.func("o_max")[1])
    if len(rows) > 1 and rng.random() < 0.5:
        out.append(f"o_out.map({', '.join(rng.sample(rows, len(rows)))})")
    rng.shuffle(out)
    return out


GLUON_SHAPED = ("o_out.block(", "o_out.tensorize(", "o_out.map(", "o_out.num_warps(",
                "o_out.num_stages(", "o_out.persistent(")


def gluon_shape(rng, prog, statements, l, always=False):
    """Mostly, the rest of a schedule whose warp-specialized online loop has the Gluon form, in
    place of `o_out`'s own blocks, tiles, warps, stages and programs in `statements` (edited):
    blocks of 64 rows a consumer warpgroup (64 at 4 warps, 128 at 8) along one row label, the
    others of one element, the keys in steps of 16 to 128 and the other labels whole, 2 to 4
    stages, persistent programs or not (the update pipelined where the loop allows)."""
    rows = list(prog.func("o_max")[1])
    if (not always and rng.random() > 0.6) or not rows:
        return []
    statements[:] = [st for st in statements if not st.startswith(GLUON_SHAPED)]
    row = rng.choice(rows)
    block, warps = rng.choice([(64, 4), (128, 8)])
    chain = [prog.func(f)[2] for f in ("o_max", "o_exp", "o_sum", "o_out")]
    used = {d for e in chain for n in walk(e) if n[0] == "acc" for d in n[2]
            if isinstance(d, str)}
    whole = [d for d in prog.labels if d in used | set(prog.func("o_out")[1])
             and d not in rows and d != l]
    out = ["o_out.block(" + ", ".join(f"{d}:{block if d == row else 1}" for d in rows) + ")",
           "o_out.tensorize(" + ", ".join([f"{row}:0", f"{l}:{rng.choice([16, 64, 128])}"] +
                                          [f"{d}:0" for d in whole]) + ")",
           f"o_out.num_warps({warps})", f"o_out.num_stages({rng.choice([2, 3, 4])})"]
    if rng.random() < 0.5:
        out.append(f"o_out.persistent({rng.choice(['interleaved', 'blocked'])})")
    return out


def gen_stores(rng, prog, fused, split):
    """`g.store_in(f)`: a compiled f's kernel also stores g (docs/language.md, store_in), with
    the rules' conditions met (mostly): g's dimensions are f's, f splits no reduction, a g
    that f reads is fused into f."""
    out = []
    stored = set()
    for f in prog.compiled:
        if f in fused or f in split or rng.random() > 0.6:
            continue
        deps = func_deps(prog, f)
        fdims = prog.func(f)[1]
        for g, gdims, _ in prog.funcs:
            if g == f or g in prog.compiled or g in stored or not set(gdims) <= set(fdims):
                continue
            if g in fused and fused[g][0] != f:
                continue
            if g in deps and g not in fused and rng.random() < 0.9:
                continue
            if f in func_deps(prog, g) and rng.random() < 0.9:
                continue                         # store-reads-output
            if rng.random() < 0.8:
                stored.add(g)
                out.append(f"{g}.store_in({f})")
    return out


def stored_in(case, f):
    """The Funcs that `f`'s wrapper also returns, in statement order."""
    out = []
    for s in case.schedule:
        m = re.fullmatch(r"\s*(\w+)\.store_in\(\s*(\w+)\s*\)\s*", s)
        if m and m.group(2) == f and m.group(1) not in out:
            out.append(m.group(1))
    return out


def _grouped(rng, f, prim, items):
    items = list(items.items())
    rng.shuffle(items)
    out = []
    while items:
        n = len(items) if rng.random() < 0.7 else rng.randint(1, len(items))
        chunk, items = items[:n], items[n:]
        out.append(f"{f}.{prim}(" + ", ".join(f"{d}:{v}" for d, v in chunk) + ")")
    return out


def random_map(rng, blocked):
    order = list(blocked)
    rng.shuffle(order)
    ids = list(SPLIT_IDS)
    rng.shuffle(ids)
    out, pending = [], []
    for d in order:
        if rng.random() < 0.3 and ids:
            ident = ids.pop()
            out.append(f"{d}:{ident}/{rng.choice([1, 2, 3, 4])}")
            pending.append(ident)
        else:
            out.append(d)
    for ident in pending:
        at = next(i for i, a in enumerate(out) if a.endswith(f":{ident}/" + a.split("/")[-1]))
        out.insert(rng.randint(at + 1, len(out)), ident)
    return out


# ------------------------------------------------------------------------------------------------
# Running a case.

@dataclasses.dataclass
class Result:
    outcome: str
    detail: str = ""                  # message, max error, ...
    signature: str = ""               # what must stay the same while reducing
    extra: list = dataclasses.field(default_factory=list)   # further findings: (outcome, detail)
    timings: dict = dataclasses.field(default_factory=dict)
    coverage: set = dataclasses.field(default_factory=set)  # code paths the module uses

    def classes(self):
        return {(self.outcome, self.signature)} | {(o, s) for o, _, s in self.extra}


def normalize_message(text):
    """First line of a diagnostic without location, names or numbers."""
    line = ""
    for line in text.splitlines():
        if ": error: " in line:
            break
    line = re.sub(r"^.*?: error: ", "", line.strip())
    line = re.sub(r"`[^`]*`", "`_`", line)
    line = re.sub(r"\(it has [^)]*\)", "(it has _)", line)
    line = re.sub(r"\d+(\.\d+)?", "N", line)
    return line[:160]


def normalize_exception(text):
    text = text.strip().splitlines()[-1] if text.strip() else text
    text = re.sub(r"'[^']*'", "'_'", text)
    text = re.sub(r"\d+", "N", text)
    return text[:160]


COVERAGE = {"tl.dot": "tl.dot(", "split reduction": "_partial_kernel",
            "atomic": "tl.atomic_", "fusion temporary": "_fuse_ptr",
            "tensor loop": "_arange", "map split": "_pid = pid", "helper": "@triton.jit\ndef _dt_",
            "k-contiguous relayout": "_dt_k_contiguous(", "persistent": "tl.num_programs(0)",
            "tma": "tl.make_tensor_descriptor(", "tma store": "_desc.store([", "subtile": "tl.split(tl.permute(", "warp_specialize": "warp_specialize=", "gluon": "@gluon.jit", "flatten": "flatten=True",
            "gluon online": "_online(", "pipelined update": "_dt_prev_phase",
            "gluon store through the queries": "tma.async_copy_shared_to_global(",
            "rounded product": "_dt_mul_rn(",
            "cache hint": 'eviction_policy="evict_last"', "peeled tile": "_iter_full = "}


def module_coverage(text):
    return {name for name, marker in COVERAGE.items() if marker in text}


def compile_case(case, workdir, timeout=60):
    """Runs dtc on the case. Returns (Result or None, module path)."""
    src = pathlib.Path(workdir) / "case.dt"
    out = pathlib.Path(workdir) / f"dtmod_{os.getpid()}_{time.monotonic_ns()}.py"
    src.write_text(program_text(case.program, case.schedule))
    try:
        p = subprocess.run([str(DTC), str(src), "-o", str(out)], capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return Result(DTC_CRASH, f"dtc did not finish in {timeout} s", "timeout"), None
    err = p.stderr
    if p.returncode == 0:
        return None, out
    if "please report this compiler bug" in err or "internal error" in err.lower():
        return Result(INTERNAL, err.strip(), normalize_message(err)), None
    if p.returncode == 1:
        return Result(REJECTED, err.strip(), normalize_message(err)), None
    sig = f"exit {p.returncode}" if p.returncode > 0 else f"signal {-p.returncode}"
    return Result(DTC_CRASH, f"{sig}\n{err.strip()[-2000:]}", sig), None


def _child(conn, module_path, case_json, funcs):
    """Runs in a forked process: imports the module, runs each compiled Func on the case's
    inputs, its make_inputs and its reference. Sends plain data back."""
    try:
        import importlib.util
        import inspect
        case = Case.from_json(case_json)
        res = {}
        try:
            name = f"dtfuzz_mod_{os.getpid()}"
            spec = importlib.util.spec_from_file_location(name, module_path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        except BaseException:  # noqa: BLE001
            conn.send({"import": traceback.format_exc()[-3000:]})
            return
        inputs, scalars = make_case_inputs(case)
        for i, f in enumerate(funcs):
            r = {}
            py = module.PYTHON_NAMES[f]
            wrapper = getattr(module, py)
            params = [p for p in inspect.signature(wrapper).parameters.values()
                      if p.kind == p.POSITIONAL_OR_KEYWORD]
            args = []
            for p in params:
                dt = _dt_name(case, p.name)
                args.append(inputs[dt] if dt in inputs else scalars[dt])
            kw_map = getattr(module, f"SIZE_KEYWORDS_{py}")
            kw = {kw_map[l]: s for l, s in case.sizes.items() if l in kw_map}
            outs = [f] + stored_in(case, f)
            try:
                module_sizes = {l: case.sizes[l] for l in kw_map}
                # the ranges of integer inputs too, which need not be sizes of the call
                module_sizes.update({r: case.sizes[r] for r in case.program.ints.values()
                                     if r and r not in module_sizes})
                made = getattr(module, f"make_inputs_{py}")(module_sizes,
                                                            dtype=DTYPES[case.dtype], seed=0)
                bad = _check_made_inputs(case, [p.name for p in params], made)
                if bad:
                    r["make_inputs"] = bad
            except Exception:  # noqa: BLE001
                r["make_inputs"] = traceback.format_exc()[-2000:]

            def results(value):
                """{Func: float64 array} of a wrapper's or reference's result (a tuple with
                store_in)."""
                vals = value if isinstance(value, tuple) else (value,)
                if len(vals) != len(outs):
                    raise TypeError(f"{len(vals)} results for {len(outs)} outputs {outs}")
                return ({g: v.detach().double().numpy().copy() for g, v in zip(outs, vals)},
                        {g: str(v.dtype).replace("torch.", "") for g, v in zip(outs, vals)})
            try:
                t0 = time.perf_counter()
                got = wrapper(*args, **kw)
                r["time"] = time.perf_counter() - t0
                r["got"], r["got_dtype"] = results(got)
            except Exception:  # noqa: BLE001
                r["raises"] = traceback.format_exc()[-3000:]
            try:
                ref = getattr(module, f"reference_{py}")(*args, **kw)
                r["ref"], _ = results(ref)
            except Exception:  # noqa: BLE001
                r["ref_raises"] = traceback.format_exc()[-2000:]
            if case.check_sizes and "got" in r:
                r["sizes"] = _check_disagreeing_sizes(case, module, py, args, kw_map)
            res[f] = r
        conn.send(res)
    except BaseException:  # noqa: BLE001
        conn.send({"child": traceback.format_exc()[-3000:]})


def _dt_name(case, pname):
    """The DT name of a wrapper parameter (renamed ones end in `_`)."""
    prog = case.program
    while pname not in prog.inputs and pname not in prog.sins and pname.endswith("_"):
        pname = pname[:-1]
    return pname


def _check_made_inputs(case, pnames, made):
    """What is wrong with make_inputs' arguments: a scalar's written value not passed, an
    integer scalar not an int, an `int(y)` input not int64 positions 0 .. len(y) - 1."""
    prog = case.program
    made = made if isinstance(made, tuple) else (made,)
    if len(made) != len(pnames):
        return f"{len(made)} arguments for parameters {pnames}"
    bad = []
    for pname, v in zip(pnames, made):
        n = _dt_name(case, pname)
        if n in prog.sin_values:
            want = int(prog.sin_values[n]) if n in prog.sin_ints else float(prog.sin_values[n])
            if v != want or (n in prog.sin_ints and type(v) is not int):
                bad.append(f"{n} is {v!r}, not its written value {prog.sin_values[n]}")
        elif n in prog.sin_ints and type(v) is not int:
            bad.append(f"{n} is {v!r}, not a Python int")
        if n in prog.ints:
            if not isinstance(v, torch.Tensor) or v.dtype != torch.int64:
                bad.append(f"{n} is {getattr(v, 'dtype', type(v))}, not int64")
            elif prog.ints[n] and v.numel() and case.sizes[prog.ints[n]] > 0:
                size = case.sizes[prog.ints[n]]
                if int(v.min()) < 0 or int(v.max()) >= size:
                    bad.append(f"{n} holds {int(v.min())} .. {int(v.max())}, not positions "
                               f"0 .. {size - 1} along {prog.ints[n]}")
    return "; ".join(bad)


def _check_disagreeing_sizes(case, module, py, args, kw_map):
    """Gives two labels that must have one size (same input axis, or a Func read with them)
    different sizes by keyword. Returns a description when a call accepts it. Only the Funcs
    that the compiled one needs tie labels."""
    f = next(dt for dt, name in module.PYTHON_NAMES.items() if name == py)
    needed = {f, *func_deps(case.program, f)}
    find = size_classes(dataclasses.replace(
        case.program, funcs=[g for g in case.program.funcs if g[0] in needed]))
    classes = {}
    for l in kw_map:
        if l in case.program.labels:
            classes.setdefault(find(("L", l)), []).append(l)
    out = []
    for labs in classes.values():
        if len(labs) < 2:
            continue
        kw = {kw_map[l]: s for l, s in case.sizes.items() if l in kw_map}
        kw[kw_map[labs[-1]]] = case.sizes[labs[-1]] + 1
        for what in (py, f"reference_{py}"):
            try:
                getattr(module, what)(*args, **kw)
                out.append(f"{what}(..., {labs[-1]}={kw[kw_map[labs[-1]]]}) with "
                           f"{labs[0]}={case.sizes[labs[0]]}: no ValueError")
            except ValueError:
                pass
            except Exception as e:  # noqa: BLE001
                out.append(f"{what}(..., {labs[-1]}={kw[kw_map[labs[-1]]]}) with "
                           f"{labs[0]}={case.sizes[labs[0]]}: {type(e).__name__}, not ValueError")
    return "\n".join(out)


_FORK = None


def run_module(module_path, case, funcs, timeout):
    global _FORK
    import multiprocessing
    if _FORK is None:
        _FORK = multiprocessing.get_context("fork")
    parent, child = _FORK.Pipe(duplex=False)
    p = _FORK.Process(target=_child, args=(child, str(module_path), case.to_json(), funcs))
    p.start()
    child.close()
    data = None
    if parent.poll(timeout):
        try:
            data = parent.recv()
        except EOFError:
            data = None
    p.join(1 if data is not None else 0.1)
    if p.is_alive():
        p.kill()
        p.join()
        if data is None:
            return {"crash": f"no result within {timeout} s (killed)", "sig": "timeout"}
    if data is None:
        code = p.exitcode
        sig = f"signal {-code}" if code and code < 0 else f"exit {code}"
        return {"crash": f"the process running the module died ({sig})", "sig": sig}
    return data


def tolerances(case):
    return (1e-4, 1e-5) if case.dtype == "float32" else (2e-3, 2e-3)


# Float32 rounding of the largest intermediate, times this, is allowed on any element: a sum
# that cancels (an antisymmetric one is exactly 0) keeps the rounding of its terms.
ROUNDING_SLACK = 16 * torch.finfo(torch.float32).eps


def compare(case, f, got, expected, uncertain=None, max_abs=0.0):
    """None when `got` matches `expected`, else a description with the largest error.
    `max_abs`: the largest finite intermediate magnitude of the evaluation (Evaluator)."""
    got = torch.as_tensor(got, dtype=torch.float64)
    if tuple(got.shape) != tuple(expected.shape):
        return f"shape {tuple(got.shape)}, expected {tuple(expected.shape)}"
    rtol, atol = tolerances(case)
    floor = ROUNDING_SLACK * max_abs
    exp_r = expected.to(DTYPES[case.dtype]).double()       # the output is rounded once
    bad = _mismatch(got, exp_r, rtol, atol, None, floor)
    if uncertain is not None:
        bad &= ~uncertain
    if not bool(bad.any()):
        return None
    # Discontinuities and cancellations: allow what a 1e-6 relative change of the inputs moves.
    sens = torch.zeros_like(expected)
    for seed in (1, 2, 3):
        pert, _ = evaluate(case, [f], perturb=seed)
        d = (pert[f].to(DTYPES[case.dtype]).double() - exp_r).abs()
        sens = torch.maximum(sens, torch.nan_to_num(d, nan=float("inf"), posinf=float("inf")))
    bad = _mismatch(got, exp_r, rtol, atol, sens, floor)
    if uncertain is not None:
        bad &= ~uncertain
    if not bool(bad.any()):
        return None
    # Comparisons and rounding functions of values that float32 rounds differently (tanh(9) is
    # 1.0 in float32): also accept, element by element, the evaluator run in float32.
    try:
        f32, _ = evaluate(case, [f], dtype=torch.float32)
        bad &= _mismatch(got, f32[f].to(DTYPES[case.dtype]).double(), rtol, atol, None, floor)
        if case.dtype != "float32" and bool(bad.any()):
            # tl.dot operands computed in the kernel are rounded to the inputs' dtype.
            low, _ = evaluate(case, [f], dtype=torch.float32, dot_dtype=DTYPES[case.dtype])
            bad &= _mismatch(got, low[f].to(DTYPES[case.dtype]).double(), rtol, atol, None,
                             floor)
    except Exception:  # noqa: BLE001
        pass
    if not bool(bad.any()):
        return None
    idx = bad.nonzero()[0].tolist()
    err = (got - exp_r).abs()
    err = torch.where(bad, torch.nan_to_num(err, nan=float("inf")), torch.zeros_like(err))
    worst = err.flatten().argmax().item()
    return (f"{int(bad.sum())} of {bad.numel()} elements wrong; max error "
            f"{err.flatten()[worst].item():.4g} (got {got.flatten()[worst].item():.6g}, expected "
            f"{exp_r.flatten()[worst].item():.6g}); first wrong at {idx}: got "
            f"{got[tuple(idx)].item():.6g}, expected {exp_r[tuple(idx)].item():.6g}")


def _mismatch(got, exp, rtol, atol, sens, floor=0.0):
    scale = exp.abs()
    finite = torch.isfinite(exp)
    mag = max(1.0, float(scale[finite].max())) if bool(finite.any()) else 1.0
    tol = atol * mag + rtol * torch.nan_to_num(scale, posinf=0.0) + floor
    if sens is not None:
        tol = tol + 10 * sens
    same_special = (torch.isnan(got) & torch.isnan(exp)) | (got == exp)
    close = (got - exp).abs() <= tol
    return ~(same_special | close)


# --hopper: each module's Gluon kernels (warp_specialize on Hopper, codegen/GluonPrinter.cpp)
# compiled for sm_90 as well, which the interpreter cannot run (tests/hopper.py).
HOPPER_COMPILE = False


def hopper_failures(text, module_path):
    """The Gluon kernels of a module that do not compile for sm_90, with Triton's error: each
    at the warps and stages its wrapper launches it with, in bfloat16, a whole dimension's tile
    (`x_TILE`, its size's power of two at a launch) 64 wide."""
    sys.path.insert(0, str(ROOT / "tests"))
    from hopper import compile_for_hopper
    failures = []
    for m in re.finditer(r"plan\.launch\(\d+, (\w+)_hopper, .*?\), (\d+), (\d+), \(", text, re.S):
        # An online loop's Gluon kernel names its own warps last in its launch (_DtHopper).
        own = re.search(rf"{m.group(1)}_hopper = _DtHopper\(\w+, \w+, \([^)]*\), \w+, (\d+)\)",
                        text)
        try:
            compile_for_hopper(module_path, m.group(1) + "_gluon", "bf16", tiles=64,
                               num_warps=int(own.group(1) if own else m.group(2)),
                               num_stages=int(m.group(3)))
        except AssertionError as e:
            failures.append(f"{m.group(1)}_gluon: {str(e)[-600:]}")
    return failures


def run_case(case, workdir, timeout=120):
    """Compiles and runs one case; returns a Result."""
    t0 = time.monotonic()
    res, module_path = compile_case(case, workdir, timeout=min(60, timeout))
    t1 = time.monotonic()
    if res is not None:
        res.timings = {"dtc": t1 - t0}
        return res
    try:
        text = module_path.read_text()
        coverage = module_coverage(text)
        if HOPPER_COMPILE and "_gluon(" in text:
            failures = hopper_failures(text, module_path)
            if failures:
                return Result(HOPPER, "\n".join(failures),
                              normalize_exception(failures[0].split(": ", 1)[1]),
                              timings={"dtc": t1 - t0})
        funcs = list(case.program.compiled)
        data = run_module(module_path, case, funcs, timeout)
    finally:
        try:
            module_path.unlink()
        except OSError:
            pass
    t2 = time.monotonic()
    timings = {"dtc": t1 - t0, "run": t2 - t1}
    if "crash" in data:
        return Result(KERNEL_CRASH, data["crash"], data["sig"], timings=timings)
    if "import" in data:
        return Result(IMPORT, data["import"], normalize_exception(data["import"]), timings=timings)
    if "child" in data:
        return Result(RAISES, data["child"], normalize_exception(data["child"]), timings=timings)
    outs = {f: [f] + stored_in(case, f) for f in funcs}
    expected, ev = evaluate(case, list(dict.fromkeys(g for f in funcs for g in outs[f])))
    main, extra = None, []
    for f in funcs:
        r = data[f]
        if "make_inputs" in r:
            extra.append((MAKE_INPUTS, f"{f}: {r['make_inputs']}",
                          normalize_exception(r["make_inputs"])))
        if "raises" in r and SIZES_REFUSED in r["raises"]:
            # The wrapper refuses sizes at which a tile as wide as a dimension would make a
            # tensor larger than Triton allows: a rejection of the schedule at these sizes.
            line = next(l for l in r["raises"].splitlines() if SIZES_REFUSED in l)
            main = main or Result(REJECTED, f"{f}: {line}", normalize_message(line))
        elif "raises" in r:
            main = main or Result(RAISES, f"{f}: {r['raises']}", normalize_exception(r["raises"]))
        else:
            # The outputs have the float inputs' dtype (integer inputs do not count).
            floats = [n for n in used_inputs(case.program, outs[f]) if n in case.program.inputs
                      and n not in case.program.ints]
            want_dtype = case.dtype if floats else "float32"
            for g in outs[f]:
                if r["got_dtype"][g] != want_dtype:
                    main = main or Result(WRONG, f"{g}: dtype {r['got_dtype'][g]}", "dtype")
                msg = compare(case, g, r["got"][g], expected[g], ev.uncertain[g], ev.max_abs)
                if msg:
                    where = g if g == f else f"{g} (stored in {f})"
                    main = main or Result(WRONG, f"{where}: {msg}", "wrong")
        if r.get("sizes"):
            extra.append((SIZES, f"{f}: {r['sizes']}", "sizes"))
        if "ref_raises" in r:
            extra.append((REFERENCE, f"{f}: reference raises: {r['ref_raises']}",
                          "raises " + normalize_exception(r["ref_raises"])))
        elif "ref" in r:
            for g in outs[f]:
                msg = compare(case, g, r["ref"][g], expected[g], ev.uncertain[g], ev.max_abs)
                if msg:
                    extra.append((REFERENCE, f"{g}: {msg}", "wrong"))
    main = main or Result(OK)
    main.extra = extra
    main.timings = timings
    main.coverage = coverage
    return main


# ------------------------------------------------------------------------------------------------
# Case generation.

def generate_program_and_sizes(rng, zero_sizes=0.02, wild=0.1, tries=40, avoid=()):
    """A program, sizes and inputs seed whose float64 evaluation is tame."""
    for _ in range(tries):
        gen = Gen(rng, wild=rng.random() < wild, avoid=avoid)
        prog = gen.program()
        if check_program(prog):
            continue
        zero = zero_sizes
        sizes = {}
        find = size_classes(prog)
        by_class = {}
        for l in prog.labels:
            c = find(("L", l))
            if c not in by_class:
                by_class[c] = draw_size(rng, zero)
            sizes[l] = by_class[c]
        case = Case(prog, [], sizes, "float32" if rng.random() < 0.85 else "float16",
                    rng.randrange(1 << 30), gen.used_wild, rng.random() < 0.2)
        if untame(case):
            continue
        return case
    return None


def untame(case):
    try:
        _, ev = evaluate(case, list(dict.fromkeys([f[0] for f in case.program.funcs])))
    except (EvalError, RuntimeError):
        return True
    if ev.max_abs > 1e6:
        return True
    if ev.nonfinite and not case.wild:
        return True
    return False


def generate_cases(seed, schedules_per_program=3, **kw):
    """Endless stream of cases: each program with a few schedules (and sizes)."""
    rng = random.Random(seed)
    n = 0
    while True:
        base = generate_program_and_sizes(rng, **kw)
        if base is None:
            continue
        n += 1
        for j in range(rng.randint(1, schedules_per_program)):
            case = Case.from_json(base.to_json())
            if j > 0 and rng.random() < 0.5:           # other sizes, same program
                sizes = {}
                find = size_classes(case.program)
                by_class = {}
                for l in case.program.labels:
                    c = find(("L", l))
                    by_class.setdefault(c, draw_size(rng, kw.get("zero_sizes", 0.02)))
                    sizes[l] = by_class[c]
                case.sizes = sizes
                if untame(case):
                    continue
            case.schedule = gen_schedule(rng, case.program, case.sizes)
            yield n, case


# ------------------------------------------------------------------------------------------------
# Reducer.

def features(case, result=None):
    """Ingredients of a case: node kinds, builtins, schedule primitives, size traits."""
    fs = set()
    for _, dims, e in case.program.funcs:
        for n in walk(e):
            if n[0] == "bin":
                fs.add("op" + n[1])
            elif n[0] == "call":
                fs.add(n[1])
            elif n[0] == "red":
                fs.add(n[1])
            elif n[0] == "acc":
                fs.add("acc")
                home = case.program.inputs.get(n[1]) or (case.program.func(n[1]) or [0, []])[1]
                if all(isinstance(p, str) for p in n[2]) and sorted(home) == sorted(n[2]) \
                        and list(home) != list(n[2]):
                    fs.add("transposed")
                if case.program.func(n[1]) is not None:
                    fs.add("reads-func")
                if n[1] in case.program.ints:
                    fs.add("int-input")
                for p in n[2]:
                    if not isinstance(p, str):
                        ext = extent_label(p, case.program)
                        fs.add("gather" if ext and any(
                            m[0] == "acc" for m in walk(p)) else "shift" if ext else "position")
            elif n[0] == "num" and n[1] == "inf":
                fs.add("inf")
            else:
                fs.add(n[0])
    for s in case.schedule:
        m = re.match(r"\w+\.(\w+)\((.*)\)", s)
        if m:
            fs.add("." + m.group(1))
    if any(v == 0 for v in case.sizes.values()):
        fs.add("size0")
    if case.program.sin_ints:
        fs.add("sin-int")
    if case.program.sin_values:
        fs.add("sin-value")
    fs.add(case.dtype)
    return fs


def _replace_at(e, path, new):
    if not path:
        return new
    e = list(e)
    i = path[0]
    if e[0] == "call":
        args = list(e[2])
        args[i] = _replace_at(args[i], path[1:], new)
        e[2] = args
    else:
        idx = {"neg": [1], "bin": [2, 3], "red": [2], "dot": [1, 2]}[e[0]][i]
        e[idx] = _replace_at(e[idx], path[1:], new)
    return e


def _paths(e, path=()):
    yield path, e
    for i, c in enumerate(children(e)):
        yield from _paths(c, path + (i,))


def _size(e):
    return sum(1 for _ in walk(e))


def cleanup(case):
    """Drops Funcs nothing needs, unused inputs, scalars and labels, and statements about them."""
    prog = case.program.copy()
    keep = set(prog.compiled)
    for c in prog.compiled:
        keep |= set(func_deps(prog, c))
    prog.funcs = [f for f in prog.funcs if f[0] in keep]
    used = set()
    labels = set()
    for _, dims, e in prog.funcs:
        labels |= set(dims)
        for n in walk(e):
            if n[0] in ("acc", "sin"):
                used.add(n[1])
            if n[0] == "acc":
                labels |= {p for p in n[2] if isinstance(p, str)}
            if n[0] in ("red", "dot"):
                labels.add(n[-1])
            if n[0] in ("len", "lab"):
                labels.add(n[1])
    prog.inputs = {n: h for n, h in prog.inputs.items() if n in used}
    prog.ints = {n: r for n, r in prog.ints.items() if n in used}
    labels |= {r for r in prog.ints.values() if r}
    prog.sins = [s for s in prog.sins if s in used]
    prog.sin_ints = [s for s in prog.sin_ints if s in used]
    prog.sin_values = {s: v for s, v in prog.sin_values.items() if s in used}
    prog.labels = {l: k for l, k in prog.labels.items() if l in labels}
    funcs = {f[0] for f in prog.funcs}
    sched = []
    for s in case.schedule:
        m = re.match(r"(\w+)\.(\w+)\((.*)\)", s)
        if m and m.group(1) not in funcs:
            continue
        if m and m.group(2) in ("fuse_at", "store_in") and \
                m.group(3).split(",")[0].strip() not in funcs:
            continue
        sched.append(s)
    sizes = {l: s for l, s in case.sizes.items() if l in prog.labels}
    return Case(prog, sched, sizes, case.dtype, case.seed, case.wild, case.check_sizes)


def _candidates(case):
    """Smaller variants of a case, most promising first."""
    prog = case.program
    # 1. Compile another Func (and drop the rest).
    for f in prog.funcs:
        if f[0] not in prog.compiled:
            p = prog.copy()
            p.compiled = [f[0]]
            yield "compile " + f[0], dataclasses.replace(case, program=p)
    if len(prog.compiled) > 1:
        for c in prog.compiled:
            p = prog.copy()
            p.compiled = [c]
            yield "compile only " + c, dataclasses.replace(case, program=p)
    # 2. Inline a Func into the Funcs that read it (labels renamed), so it can be dropped.
    for g in prog.funcs:
        if g[0] in prog.compiled:
            continue
        p = prog.copy()
        ok = True
        for f in p.funcs:
            if f[0] != g[0]:
                f[2] = _inline(f[2], g)
                if f[2] is None:
                    ok = False
                    break
        if ok:
            yield "inline " + g[0], dataclasses.replace(case, program=p)
    # 3. Drop schedule statements, then arguments of statements.
    for i in range(len(case.schedule)):
        yield "drop " + case.schedule[i], dataclasses.replace(
            case, schedule=case.schedule[:i] + case.schedule[i + 1:])
    for i, s in enumerate(case.schedule):
        m = re.match(r"(\w+)\.(block|tensorize)\((.*)\)", s)
        if m and "," in m.group(3):
            args = [a.strip() for a in m.group(3).split(",")]
            for j in range(len(args)):
                rest = args[:j] + args[j + 1:]
                yield "shorten " + s, dataclasses.replace(
                    case, schedule=case.schedule[:i] + [f"{m.group(1)}.{m.group(2)}("
                                                        + ", ".join(rest) + ")"]
                    + case.schedule[i + 1:])
    # 4. Replace subexpressions: by a literal, by one of their operands, a reduction by its
    #    operand. Largest subexpressions first.
    for fi, (name, dims, e) in enumerate(prog.funcs):
        paths = sorted(_paths(e), key=lambda pe: -_size(pe[1]))
        for path, sub in paths:
            options = []
            if sub[0] != "num" or sub[1] not in ("1", "2"):
                options.append(["num", "1"])
            options += children(sub)
            if sub[0] == "acc" and prog.func(sub[1]) is not None:
                # a Func read by a read of the same labels of an input of the same rank
                for n, h in prog.inputs.items():
                    if len(h) == len(sub[2]):
                        options.append(["acc", n, list(sub[2])])
                        break
            if sub[0] == "acc" and not all(isinstance(p, str) for p in sub[2]):
                # computed positions by the labels of their dimensions
                plain = [p if isinstance(p, str) else extent_label(p, prog)
                         or plain_dimension_label(prog, sub[1], i) for i, p in enumerate(sub[2])]
                if all(plain):
                    options.append(["acc", sub[1], plain])
            if sub[0] == "bin" and sub[1] not in ("+", "//"):
                options.append(["bin", "+", sub[2], sub[3]])
            if sub[0] == "red" and sub[1] != "rsum":
                options.append(["red", "rsum", sub[2], sub[3]])
            if sub[0] == "num" and sub[1] not in ("1", "2", "0"):
                options += [["num", "2"], ["num", "0"]]
            for new in options:
                p = prog.copy()
                p.funcs[fi][2] = _replace_at(e, path, new)
                if check_program(p) is None:
                    yield f"replace in {name}", dataclasses.replace(case, program=p)
    # 5. Shrink sizes (one size class at a time).
    find = size_classes(prog)
    classes = {}
    for l, s in case.sizes.items():
        classes.setdefault(find(("L", l)), []).append(l)
    for labs in classes.values():
        s = case.sizes[labs[0]]
        for new in sorted({1, 2, s // 2, s - 1} - {s}):
            if 0 < new < s or (new == 1 and s > 1):
                sizes = dict(case.sizes)
                for l in labs:
                    sizes[l] = new
                yield f"size {labs[0]}={new}", dataclasses.replace(case, sizes=sizes)
    if case.check_sizes:
        yield "no size check", dataclasses.replace(case, check_sizes=False)
    # 6. float32 instead of float16.
    if case.dtype != "float32":
        yield "float32", dataclasses.replace(case, dtype="float32")


def _rename(e, m):
    kind = e[0]
    if kind == "acc":
        return ["acc", e[1], [m.get(p, p) if isinstance(p, str) else _rename(p, m)
                              for p in e[2]]]
    if kind in ("len", "lab"):
        return [kind, m.get(e[1], e[1])]
    if kind == "neg":
        return ["neg", _rename(e[1], m)]
    if kind == "bin":
        return ["bin", e[1], _rename(e[2], m), _rename(e[3], m)]
    if kind == "call":
        return ["call", e[1], [_rename(a, m) for a in e[2]]]
    if kind == "red":
        return ["red", e[1], _rename(e[2], m), m.get(e[3], e[3])]
    if kind == "dot":
        return ["dot", _rename(e[1], m), _rename(e[2], m), m.get(e[3], e[3])]
    return e


def _inline(e, g, _ok=None):
    """e with every access to Func g replaced by g's definition (labels renamed); None when a
    renamed label would be captured by a reduction inside g."""
    name, dims, body = g
    bound = {n[-1] for n in walk(body) if n[0] in ("red", "dot")} - set(dims)
    if e[0] == "acc" and e[1] == name:
        m = dict(zip(dims, e[2]))
        if any(v in bound for v in m.values()):
            return None
        return _rename(body, m)
    kids = children(e)
    if not kids:
        return e
    new = [_inline(c, g) for c in kids]
    if any(c is None for c in new):
        return None
    out = list(e)
    if e[0] == "call":
        out[2] = new
    else:
        for i, idx in enumerate({"neg": [1], "bin": [2, 3], "red": [2], "dot": [1, 2]}[e[0]]):
            out[idx] = new[i]
    return out


def reduce_case(case, result, target, workdir, budget_s=120, max_tries=2000, log=None,
                runner=None):
    """Greedy delta debugging: keeps any smaller variant that still shows `target`, an
    (outcome, signature) pair of `result`, the case's Result."""
    runner = runner or (lambda c: run_case(c, workdir))
    deadline = time.monotonic() + budget_s
    best, best_res = cleanup(case), result
    r = runner(best)
    if target in r.classes():
        best_res = r
    else:
        best = case
    tries = 0
    progress = True
    while progress and time.monotonic() < deadline and tries < max_tries:
        progress = False
        for what, cand in _candidates(best):
            if time.monotonic() > deadline or tries >= max_tries:
                break
            cand = cleanup(cand)
            if check_program(cand.program) is not None:
                continue
            if untame_for_reduction(cand, best):
                continue
            tries += 1
            r = runner(cand)
            if target in r.classes():
                if log:
                    log(f"    reduced: {what}")
                best, best_res = cand, r
                progress = True
                break
    return best, best_res


def untame_for_reduction(cand, best):
    try:
        return untame(cand) and not untame(best)
    except Exception:  # noqa: BLE001
        return True


# ------------------------------------------------------------------------------------------------
# Reports.

def finding_of(result, target):
    if (result.outcome, result.signature) == target:
        return result.detail
    for o, d, s in result.extra:
        if (o, s) == target:
            return d
    return result.detail


def write_reproducer(out_dir, index, case, result, target, original=None):
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    slug = re.sub(r"[^a-z0-9]+", "_", target[0])
    stem = f"repro_{index:03d}_{slug}"
    (out_dir / f"{stem}.dt").write_text(program_text(case.program, case.schedule))
    detail = finding_of(result, target)
    text = [f"class: {target[0]}", f"signature: {target[1]}",
            f"sizes: {' '.join(f'{l}={s}' for l, s in case.sizes.items())}",
            f"dtype: {case.dtype}", f"inputs: torch.randn per input, torch.Generator seed "
            f"{case.seed} (in declaration order; scalars uniform [0.5, 1.5) after them)",
            f"schedule: {'; '.join(case.schedule) or '(default)'}",
            f"features: {' '.join(sorted(features(case)))}",
            "", "what happened:", detail.strip()[-2500:]]
    if target[0] in (WRONG, REFERENCE):
        try:
            exp, _ = evaluate(case)
            for f, t in exp.items():
                text += ["", f"expected {f} (float64 evaluator):", _short(t)]
        except Exception as e:  # noqa: BLE001
            text += ["", f"evaluator failed: {e}"]
    if original is not None:
        text += ["", "original (unreduced) case:", json.dumps(original.to_json())]
    text += ["", "case json:", json.dumps(case.to_json())]
    (out_dir / f"{stem}.txt").write_text("\n".join(text) + "\n")
    return stem


def _short(t):
    return str(t.float().flatten()[:16].tolist()) + (" ..." if t.numel() > 16 else "")


class Stats:
    def __init__(self):
        self.start = time.monotonic()
        self.programs = 0
        self.cases = 0
        self.outcomes = collections.Counter()
        self.rejections = collections.Counter()
        self.rejection_examples = {}
        self.extra = collections.Counter()
        self.coverage = collections.Counter()     # among cases that ran: code paths used
        self.dtc_s = 0.0
        self.run_s = 0.0
        self.reduce_s = 0.0
        self.findings = []            # dicts

    def summary(self):
        minutes = max(1e-9, (time.monotonic() - self.start) / 60)
        lines = [f"elapsed: {minutes:.1f} min; programs: {self.programs}; "
                 f"cases (program x schedule): {self.cases}; "
                 f"{self.cases / minutes:.1f} cases/min, {self.programs / minutes:.1f} programs/min"
                 f"; {self.cases / max(1e-9, minutes - self.reduce_s / 60):.1f} cases/min "
                 "not counting reduction"
                 f" (dtc {self.dtc_s:.0f} s, running {self.run_s:.0f} s, "
                 f"reducing {self.reduce_s:.0f} s)",
                 "outcomes: " + ", ".join(f"{k}: {v}" for k, v in self.outcomes.most_common())]
        if self.coverage:
            lines.append("cases using: " + ", ".join(
                f"{k}: {v}" for k, v in self.coverage.most_common()))
        if self.extra:
            lines.append("further findings: " + ", ".join(
                f"{k}: {v}" for k, v in self.extra.most_common()))
        lines.append("rejections by message:")
        for msg, n in self.rejections.most_common():
            lines.append(f"  {n:5d}  {msg}")
        lines.append(f"reduced reproducers: {len(self.findings)}")
        for f in self.findings:
            lines.append(f"  {f['stem']}: {f['class']} [{f['signature']}] "
                         f"(seen {f['count']}x) features: {' '.join(sorted(f['features']))}")
        return "\n".join(lines)


def fuzz(seed=0, minutes=None, max_cases=None, out_dir=None, reduce_budget_s=90,
         max_reduced_per_class=6, log=print, zero_sizes=0.02, wild=0.1, timeout=120,
         workdir=None, avoid=()):
    """Runs the fuzzer; returns Stats. Stops after `minutes` or `max_cases` cases."""
    stats = Stats()
    own_tmp = None
    if workdir is None:
        own_tmp = tempfile.TemporaryDirectory(prefix="dtfuzz_")
        workdir = own_tmp.name
    out_dir = pathlib.Path(out_dir) if out_dir else pathlib.Path(workdir) / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + minutes * 60 if minutes else None
    last_program = None
    for program_no, case in generate_cases(seed, zero_sizes=zero_sizes, wild=wild, avoid=avoid):
        if deadline and time.monotonic() > deadline:
            break
        if max_cases is not None and stats.cases >= max_cases:
            break
        if program_no != last_program:
            stats.programs += 1
            last_program = program_no
        stats.cases += 1
        try:
            res = run_case(case, workdir, timeout=timeout)
        except Exception:  # noqa: BLE001 - a fuzzer bug must not stop the run
            log("fuzzer error:\n" + traceback.format_exc())
            stats.outcomes["fuzzer error"] += 1
            continue
        stats.dtc_s += res.timings.get("dtc", 0)
        stats.run_s += res.timings.get("run", 0)
        stats.outcomes[res.outcome] += 1
        stats.coverage.update(res.coverage)
        if res.outcome == REJECTED:
            # Generated programs are legal: a rejection must come from the schedule.
            bare, _ = compile_case(dataclasses.replace(case, schedule=[]), workdir)
            key = res.signature if bare is None else "PROGRAM REJECTED: " + res.signature
            if bare is not None and bare.outcome == REJECTED:
                stats.outcomes[REJECTED] -= 1
                stats.outcomes[PROGRAM_REJECTED] += 1
            stats.rejections[key] += 1
            stats.rejection_examples.setdefault(key, (case.to_json(), res.detail))
        for o, _, _ in res.extra:
            stats.extra[o] += 1
        targets = []
        if res.outcome not in (OK, REJECTED):
            targets.append((res.outcome, res.signature))
        targets += [(o, s) for o, _, s in res.extra]
        for target in targets:
            handle_finding(stats, case, res, target, workdir, out_dir, reduce_budget_s,
                           max_reduced_per_class, log)
        if stats.cases % 25 == 0:
            log(f"[{stats.cases} cases] " + stats.summary().splitlines()[0])
            (out_dir / "summary.txt").write_text(stats.summary() + "\n")
    (out_dir / "summary.txt").write_text(stats.summary() + "\n")
    write_rejections(out_dir, stats)
    if own_tmp is not None:
        stats.out_dir = out_dir
    return stats


def write_rejections(out_dir, stats):
    lines = []
    for msg, n in stats.rejections.most_common():
        case_json, detail = stats.rejection_examples[msg]
        case = Case.from_json(case_json)
        lines += [f"## {n}x  {msg}", "", "```", program_text(case.program, case.schedule).strip(),
                  "```", "```", detail.strip()[:1500], "```", ""]
    (pathlib.Path(out_dir) / "rejections.md").write_text("\n".join(lines))


def handle_finding(stats, case, res, target, workdir, out_dir, reduce_budget_s,
                   max_reduced_per_class, log):
    fs = features(case)
    for f in stats.findings:
        if (f["class"], f["signature"]) == target and f["features"] <= fs:
            f["count"] += 1
            return
    same = [f for f in stats.findings if f["class"] == target[0]]
    if len(same) >= max_reduced_per_class:
        same[-1]["count"] += 1
        return
    # A message names the bug well enough, except for "wrong": two reproducers per message.
    same_sig = [f for f in same if f["signature"] == target[1]]
    if target[1] != "wrong" and len(same_sig) >= 2:
        same_sig[-1]["count"] += 1
        return
    log(f"finding: {target[0]} [{target[1]}]; reducing")
    t0 = time.monotonic()
    try:
        reduced, rres = reduce_case(case, res, target, workdir, budget_s=reduce_budget_s,
                                    log=lambda m: None)
    except Exception:  # noqa: BLE001
        log("reducer error:\n" + traceback.format_exc())
        reduced, rres = case, res
    stats.reduce_s += time.monotonic() - t0
    rfs = features(reduced)
    for f in stats.findings:
        if (f["class"], f["signature"]) == target and f["features"] == rfs:
            f["count"] += 1
            return
    stem = write_reproducer(out_dir, len(stats.findings) + 1, reduced, rres, target, case)
    stats.findings.append({"class": target[0], "signature": target[1], "features": rfs,
                           "stem": stem, "count": 1})
    log(f"  -> {out_dir / stem}.dt ({time.monotonic() - t0:.0f} s)\n"
        + "    " + program_text(reduced.program, reduced.schedule).replace("\n", "\n    ")
        + f"sizes: {reduced.sizes}")


def main(argv=None):
    global HOPPER_COMPILE, ONLINE_RATE, ATTENTION_RATE
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=None)
    ap.add_argument("--cases", type=int, default=None, help="stop after this many cases")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--hopper", action="store_true",
                    help="compile each module's Gluon kernels for sm_90 too (seconds a kernel)")
    ap.add_argument("--out", default="out/dtfuzz")
    ap.add_argument("--reduce-seconds", type=float, default=90,
                    help="time budget to reduce one failure")
    ap.add_argument("--max-per-class", type=int, default=8,
                    help="reduced reproducers kept per outcome class")
    ap.add_argument("--zero-sizes", type=float, default=0.02,
                    help="probability of a size 0 per size class")
    ap.add_argument("--wild", type=float, default=0.1,
                    help="fraction of programs allowed non-finite values (raw pow, x / 0)")
    ap.add_argument("--avoid", default="",
                    help="comma-separated constructs to leave out: " + ", ".join(AVOIDABLE))
    ap.add_argument("--replay", help="run one case from a reproducer's .txt or a JSON file")
    ap.add_argument("--online-rate", type=float, default=ONLINE_RATE,
                    help="how often a program is a softmax chain for online(l)")
    ap.add_argument("--attention-rate", type=float, default=ATTENTION_RATE,
                    help="how often such a chain is FlashAttention's, scheduled only as the "
                         "Gluon form asks")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    import triton  # noqa: F401 - imported once here, not in every forked child
    import triton.language  # noqa: F401
    if args.replay:
        text = pathlib.Path(args.replay).read_text()
        js = text.split("case json:\n", 1)[-1].strip() if "case json:" in text else text
        case = Case.from_json(json.loads(js))
        print(program_text(case.program, case.schedule), case.sizes, case.dtype)
        with tempfile.TemporaryDirectory() as wd:
            r = run_case(case, wd)
        print(r.outcome, r.signature)
        print(r.detail)
        for e in r.extra:
            print(*e)
        return 0
    HOPPER_COMPILE = args.hopper
    ONLINE_RATE = args.online_rate
    ATTENTION_RATE = args.attention_rate
    if args.minutes is None and args.cases is None:
        args.minutes = 1
    stats = fuzz(seed=args.seed, minutes=args.minutes, max_cases=args.cases, out_dir=args.out,
                 reduce_budget_s=args.reduce_seconds, max_reduced_per_class=args.max_per_class,
                 zero_sizes=args.zero_sizes, wild=args.wild,
                 avoid=[a for a in args.avoid.split(",") if a])
    print(stats.summary())
    bad = sum(v for k, v in stats.outcomes.items() if k not in (OK, REJECTED))
    return 1 if bad or stats.extra else 0


if __name__ == "__main__":
    sys.exit(main())
