"""Random legal schedules for the conformance algorithms, checked against the module's reference.

For each algorithm a seeded generator (deterministic per test id) picks a small random shape and,
for every Func that gets a kernel, a random legal schedule: maybe block each dimension (sizes
that need not divide the shape), tensorize (0, a power of two <= the block size, or untouched),
a random `map` loop nest with optional splits, num_warps and num_stages. Statements come in a
random order, sometimes split over several calls. Every schedule must

  * have a canonical text (`dtc --canonical --schedule S`) that round-trips (feeding the canonical
    text back gives it again) and equals the generated module's SCHEDULE;
  * compile, and compute what the module's PyTorch reference and the hand-written oracle of the
    algorithm (tests/oracles.py) compute at the random shape.

Shapes stay small and most schedules tensorize (a cost model caps the number of interpreted loop
iterations) so that the Triton interpreter keeps the whole file within a few minutes.
"""
import dataclasses
import json
import math
import os
import pathlib
import random
import re
import subprocess
import sys
import zlib

import pytest
import torch

if __name__ == "__main__":  # child process of isolated_results
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from conftest import CONFORMANCE, check_module, compile_dt, run_dtc
from oracles import ORACLES, oracle_for

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0")

BLOCK_SIZES = [1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 32, 64]
POW2 = [1, 2, 4, 8, 16, 32, 64]
SPLIT_NAMES = ["xi", "yi", "inner", "outer", "q", "part", "lo", "hi"]
DTYPES = {"float32": torch.float32, "float16": torch.float16}


# ----------------------------------------------------------------------------------------------
# The algorithm of a DT file, from `dtc --emit=ir`.

@dataclasses.dataclass
class Definition:
    func: str
    labels: list          # output labels, in order
    reduced: list         # RVars that the Func's own expression reduces over (not output labels)
    reads: list           # Funcs it reads


@dataclasses.dataclass
class Algorithm:
    funcs: list
    vars: list
    rvars: list
    defs: dict            # Func -> Definition
    compiled: list        # Funcs with compile() / compile_to_kernel()

    def kernel_funcs(self):
        """The compiled Funcs and everything they read (each gets its own kernel when unfused)."""
        out, todo = [], list(self.compiled)
        while todo:
            f = todo.pop(0)
            if f in out:
                continue
            out.append(f)
            todo += self.defs[f].reads
        return out


_DEF = re.compile(r"^(\w+)\[([\w, ]*)\] = (.*?)\s+# varies along \[[\w, ]*\](?:; reads ([\w ]+))?$")


def parse_algorithm(path):
    result = run_dtc(path, "--emit=ir")
    assert result.returncode == 0, result.stderr
    kinds = {"Func": [], "Var": [], "RVar": []}
    defs = {}
    for line in result.stdout.splitlines():
        words = line.split()
        if len(words) == 2 and words[0] in kinds:
            kinds[words[0]].append(words[1])
            continue
        m = _DEF.match(line)
        if m:
            func, labels, rhs, reads = m.groups()
            labels = [l.strip() for l in labels.split(",") if l.strip()]
            tokens = set(re.findall(r"\w+", rhs))
            reduced = [r for r in kinds["RVar"] if r in tokens and r not in labels]
            defs[func] = Definition(func, labels, reduced, (reads or "").split())
    source = path.read_text()
    compiled = re.findall(r"^\s*(\w+)\.compile(?:_to_kernel)?\(\)", source, re.M)
    assert set(defs) == set(kinds["Func"]), (defs, kinds)
    return Algorithm(kinds["Func"], kinds["Var"], kinds["RVar"], defs, compiled)


def test_parse_algorithm():
    alg = parse_algorithm(CONFORMANCE / "l3_03_softmax.dt")
    assert alg.compiled == ["softmax_out"]
    assert alg.kernel_funcs() == ["softmax_out", "exp_A", "sum_exp_A"]
    assert alg.defs["sum_exp_A"].labels == ["x"] and alg.defs["sum_exp_A"].reduced == ["y"]
    assert alg.defs["softmax_out"].reduced == []
    alg = parse_algorithm(CONFORMANCE / "l3_04_rms_norm.dt")
    assert alg.defs["rms_norm_out"].labels == ["x", "y"]
    assert alg.defs["rms_norm_out"].reduced == ["k"]


# ----------------------------------------------------------------------------------------------
# Random schedules.

@dataclasses.dataclass
class FuncSchedule:
    func: str
    block: dict = dataclasses.field(default_factory=dict)
    tensor: dict = dataclasses.field(default_factory=dict)   # 0 = whole block / dimension
    map_args: list = dataclasses.field(default_factory=list)
    num_warps: int = None
    num_stages: int = None
    atomic: list = dataclasses.field(default_factory=list)

    def statements(self, rng):
        f, out = self.func, []

        def grouped(name, items):
            # one call with every pair, or several calls with some pairs each
            items = list(items)
            rng.shuffle(items)
            while items:
                n = len(items) if rng.random() < 0.6 else rng.randint(1, len(items))
                chunk, items = items[:n], items[n:]
                sep = rng.choice([",", ", "])
                colon = rng.choice([":", ":", " : "])
                out.append(f"{f}.{name}(" + sep.join(f"{d}{colon}{v}" for d, v in chunk) + ")")

        grouped("block", self.block.items())
        grouped("tensorize", self.tensor.items())
        if self.map_args:
            out.append(f"{f}.map(" + ", ".join(self.map_args) + ")")
        if self.num_warps is not None:
            out.append(f"{f}.num_warps({self.num_warps})")
        if self.num_stages is not None:
            out.append(f"{f}.num_stages({self.num_stages})")
        for r in self.atomic:
            out.append(f"{f}.atomic({r})")
        return out

    def tile(self, d, size):
        """Elements of `d` one loop step computes."""
        t = self.tensor.get(d, 1)
        if t == 0:
            return self.block.get(d, size)
        return t

    def cost(self, labels, reduced, sizes):
        """Interpreted loop iterations (program instances x loop steps) of this Func's kernel."""
        total = 1
        for d in labels + reduced:
            n = max(sizes[d], 1)
            b = self.block.get(d)
            blocks, extent = (1, n) if b is None else (math.ceil(n / b), min(b, n))
            total *= blocks * math.ceil(extent / self.tile(d, n))
        return total


def random_map(rng, blocked):
    """A random legal loop nest over the blocked dims, splits placed after their dims."""
    order = list(blocked)
    rng.shuffle(order)
    args, names = [], list(SPLIT_NAMES)
    rng.shuffle(names)
    for d in order:
        if names and rng.random() < 0.35:
            ident, factor = names.pop(), rng.choice([1, 2, 3, 4])
            args.append((f"{d}:{ident}/{factor}", ident))
        else:
            args.append((d, None))
    out = [a for a, _ in args]
    for pos in range(len(args)):
        a, ident = args[pos]
        if ident:
            at = out.index(a)
            out.insert(rng.randint(at + 1, len(out)), ident)
    return out


def random_func_schedule(rng, func, labels, reduced, sizes, budget, block_rvars=False):
    for attempt in range(60):
        s = FuncSchedule(func)
        for d in labels:
            if rng.random() < 0.55:
                s.block[d] = rng.choice(BLOCK_SIZES)
        if block_rvars:
            for r in reduced:
                s.block[r] = rng.choice([2, 3, 4, 5, 8, 16])
        for d in labels + reduced:
            roll = rng.random()
            b = s.block.get(d)
            if roll < 0.3:
                s.tensor[d] = 0
            elif roll < 0.85:
                choices = [p for p in POW2 if b is None or p <= b]
                s.tensor[d] = rng.choice(choices)
            # else: not tensorized (tensor size 1)
        # Keep the interpreter fast: tensorize the innermost dimension most of the time, then
        # the others from the inside out while the schedule is too slow to interpret.
        if labels and rng.random() < 0.75:
            s.tensor[labels[-1]] = 0
        for d in reversed(labels + reduced):
            if s.cost(labels, reduced, sizes) <= budget:
                break
            s.tensor[d] = 0
        if s.cost(labels, reduced, sizes) > budget:
            continue
        blocked = list(s.block)
        if blocked and rng.random() < 0.65:
            s.map_args = random_map(rng, blocked)
        if rng.random() < 0.3:
            s.num_warps = rng.choice([1, 2, 4, 8, 16, 32])
        if rng.random() < 0.3:
            s.num_stages = rng.randint(1, 16)
        return s
    return FuncSchedule(func, tensor={d: 0 for d in labels + reduced})


@dataclasses.dataclass
class Case:
    key: str
    file: str
    tied: dict = dataclasses.field(default_factory=dict)   # label -> label whose size it takes
    max_size: int = 24
    budget: int = 48
    block_rvars: bool = False
    atomic: bool = False
    extra: callable = None        # (rng, algorithm, schedules) -> extra statements (fusion)
    isolate: bool = False         # run in a child process (see isolated_results)


def make_schedule(case, seed):
    """(sizes, schedule text) for `case`, a function of the seed only."""
    rng = random.Random(seed)
    alg = parse_algorithm_cached(case.file)
    sizes = {}
    for label in alg.vars + alg.rvars:
        sizes[label] = rng.randint(1, case.max_size)
    for label, other in case.tied.items():
        sizes[label] = sizes[other]
    funcs = alg.kernel_funcs()
    statements, schedules = [], {}
    for f in funcs:
        d = alg.defs[f]
        s = random_func_schedule(rng, f, d.labels, d.reduced, sizes, case.budget,
                                 block_rvars=case.block_rvars and bool(d.reduced))
        if case.atomic and d.reduced and rng.random() < 0.5:
            s.atomic = [r for r in d.reduced if r in s.block]
        schedules[f] = s
        statements += s.statements(rng)
    if case.extra:
        statements += case.extra(rng, alg, schedules)
    rng.shuffle(statements)
    sep = rng.choice([";", "; ", " ;\n"])
    text = sep.join(statements) + (rng.choice(["", ";"]) if statements else "")
    return sizes, text


_ALGORITHMS = {}


def parse_algorithm_cached(file):
    if file not in _ALGORITHMS:
        _ALGORITHMS[file] = parse_algorithm(CONFORMANCE / file)
    return _ALGORITHMS[file]


def _swish_fusion(rng, alg, schedules):
    return [f"tmp.fuse_at(swish_out, {rng.choice(['x', 'y'])})"]


# Every distinct element-wise algorithm of the conformance files (l3_08..l3_11 and l3_16 share
# relu's algorithm; l3_13..l3_15 share swish's).
ELEMENTWISE = [
    Case("fma", "fma.dt"),
    Case("add_out", "l3_01_add_out.dt"),
    Case("relu", "l3_05_relu.dt"),
    Case("swish", "l3_12_swish.dt"),
    Case("geglu", "l4_01_geglu.dt"),
]
# Reductions: block and tensorize the output dims, tensorize the RVar (blocking an RVar is a
# split reduction: a separate, smaller set below).
REDUCTIONS = [
    Case("sum", "l3_17_sum.dt", max_size=40),
    Case("sum_tensorize", "l3_19_sum_tensorize.dt", max_size=40),
    Case("rms_norm", "l3_04_rms_norm.dt", tied={"k": "y"}),
    Case("softmax", "l3_03_softmax.dt"),
]
# Part 2 primitives that the compiler implements by now: split reductions and fusion.
EXTRAS = [
    Case("sum_split", "l3_17_sum.dt", max_size=40, block_rvars=True, atomic=True, isolate=True),
    Case("swish_fused", "l3_12_swish.dt", extra=_swish_fusion, isolate=True),
]

N_ELEMENTWISE = 100       # per algorithm and dtype
N_REDUCTION = 30          # per algorithm (float32 and float16 alternate)
N_EXTRA = 20


def _params():
    out = []
    for case in ELEMENTWISE:
        for dtype in DTYPES:
            out += [pytest.param(case, dtype, i, id=f"{case.key}-{dtype}-{i}")
                    for i in range(N_ELEMENTWISE)]
    for case in REDUCTIONS:
        out += [pytest.param(case, "float32" if i % 2 == 0 else "float16", i,
                             id=f"{case.key}-{'float32' if i % 2 == 0 else 'float16'}-{i}")
                for i in range(N_REDUCTION)]
    for case in EXTRAS:
        out += [pytest.param(case, "float32" if i % 2 == 0 else "float16", i,
                             id=f"{case.key}-{'float32' if i % 2 == 0 else 'float16'}-{i}")
                for i in range(N_EXTRA)]
    return out


def seed_of(*parts):
    return zlib.crc32("/".join(map(str, parts)).encode())


def canonical(file, schedule):
    result = run_dtc(CONFORMANCE / file, "--canonical", "--schedule", schedule)
    assert result.returncode == 0, f"schedule {schedule!r} rejected:\n{result.stderr}"
    return result.stdout.strip()


def run_case(workdir, case, dtype, index):
    """Checks one random schedule; raises AssertionError with the schedule on a mismatch."""
    sizes, schedule = make_schedule(case, seed_of(case.key, dtype, index))
    context = f"\n  schedule: {schedule!r}\n  sizes: {sizes}"
    canon = canonical(case.file, schedule)
    assert canonical(case.file, canon) == canon, "canonical text does not round-trip" + context
    module = compile_dt(workdir, CONFORMANCE / case.file, schedule=schedule)
    assert module.SCHEDULE == canon, context
    try:
        check_module(module, sizes, DTYPES[dtype], seed=index, oracle=oracle_for(case.file))
    except AssertionError as e:
        raise AssertionError(f"{e}{context}\n  canonical: {canon}") from None


def _isolated_ids():
    return [p.id for p in _params() if p.values[0].isolate]


@pytest.fixture(scope="session")
def isolated_results(tmp_path_factory):
    """Results of the isolated cases, run in child processes: a kernel that stores out of bounds
    corrupts the interpreter's heap and can abort the process, which must not take the whole test
    session down. A child that dies is restarted after the case it died on."""
    workdir = tmp_path_factory.mktemp("isolated")
    results, pending = {}, _isolated_ids()
    while pending:
        proc = subprocess.run([sys.executable, __file__, str(workdir), *pending],
                              capture_output=True, text=True, timeout=900,
                              env={**os.environ, "TRITON_INTERPRET": "1"})
        for line in proc.stdout.splitlines():
            if line.startswith("RESULT "):
                _, test_id, payload = line.split(" ", 2)
                results[test_id] = json.loads(payload)
        if "READY" not in proc.stdout.splitlines():
            for test_id in pending:
                results[test_id] = "the child process did not start:\n" + proc.stderr[-3000:]
            break
        done = [i for i in pending if i in results]
        if len(done) == len(pending):
            break
        crashed = pending[len(done)]
        results[crashed] = (f"the process running this case died (exit status {proc.returncode}); "
                            "an out-of-bounds store corrupts memory under the interpreter\n"
                            + proc.stderr[-3000:])
        pending = pending[len(done) + 1:]
    return results


@pytest.mark.parametrize("case,dtype,index", _params())
def test_random_schedule(request, tmp_path, case, dtype, index):
    if case.isolate:
        message = request.getfixturevalue("isolated_results")[request.node.callspec.id]
        if message:
            sizes, schedule = make_schedule(case, seed_of(case.key, dtype, index))
            if "  schedule: " not in message:
                message += f"\n  schedule: {schedule!r}\n  sizes: {sizes}"
            pytest.fail(message, pytrace=False)
        return
    run_case(tmp_path, case, dtype, index)


def test_generator_is_deterministic_and_legal():
    """Same seed, same schedule; different seeds give a variety of schedules."""
    case = ELEMENTWISE[2]
    assert make_schedule(case, 7) == make_schedule(case, 7)
    texts = {make_schedule(case, seed)[1] for seed in range(50)}
    assert len(texts) > 40
    joined = "\n".join(texts)
    for primitive in ("block(", "tensorize(", "map(", "num_warps(", "num_stages(", "/"):
        assert primitive in joined


def test_canonical_is_order_independent():
    """The canonical text does not depend on the order or grouping of the statements."""
    case = ELEMENTWISE[4]
    for seed in range(20):
        sizes, text = make_schedule(case, seed)
        statements = [s.strip() for s in re.split(r";", text) if s.strip()]
        random.Random(seed).shuffle(statements)
        assert canonical(case.file, ";".join(statements)) == canonical(case.file, text)


# Regressions that random schedules found (fixed in 256f590), as minimal reproductions.
#
# A `map` split (factor >= 2) whose outer level is not the outermost loop: the kernel computed
# `x_pid = pid // 4 % (x_blocks + 3) // 4`, which Python groups as ((pid // 4) % (x_blocks + 3)) // 4,
# instead of pid // 4 % ((x_blocks + 3) // 4); likewise the divisor of the outer levels.
@pytest.mark.parametrize("schedule,sizes", [
    ("relu_out.block(x:2,y:3);relu_out.map(y,x:xi/4,xi)", {"x": 16, "y": 6}),
    ("relu_out.block(x:1,y:1);relu_out.map(y,x:xi/2,xi)", {"x": 3, "y": 2}),
    ("relu_out.block(x:2,y:3);relu_out.map(x,y:yi/3,yi)", {"x": 11, "y": 13}),
    ("relu_out.block(x:2,y:3);relu_out.tensorize(y:0);relu_out.map(x:xi/2,y:yi/3,yi,xi)",
     {"x": 11, "y": 13}),
])
def test_map_inner_split(tmp_path, schedule, sizes):
    module = compile_dt(tmp_path, CONFORMANCE / "l3_05_relu.dt", schedule=schedule)
    check_module(module, sizes, torch.float32, oracle=ORACLES["l3_05_relu"])


# Legal schedules that dtc rejected with an internal error ("kernel verification failed ...
# unmasked tensor load/store ... please report this compiler bug"): a whole-dimension tensor
# (size 0) along the inner dimension, the outer one not tensorized, in a kernel that reads another
# Func's output (the verifier matched `sum_exp_A` inside `sum_exp_A_ptr`).
@pytest.mark.parametrize("schedule", [
    "softmax_out.tensorize(y:0)",
    "softmax_out.block(x:2);softmax_out.tensorize(y:0)",
    "sum_exp_A.tensorize(y:0)",
])
def test_whole_dimension_tile_beside_func_input(tmp_path, schedule):
    module = compile_dt(tmp_path, CONFORMANCE / "l3_03_softmax.dt", schedule=schedule)
    check_module(module, {"x": 5, "y": 7}, torch.float32, oracle=ORACLES["l3_03_softmax"])


def test_split_reduction_with_map_split(tmp_path):
    """A split reduction (blocked RVar k) whose k blocks are split in `map` by a factor that does
    not divide their count: the surplus program instances must not store partial sums (the store
    of `sum_out_partial` was masked by x only, so they wrote past the [x, k_parts] buffer). Run in
    a child process: an out-of-bounds store can abort the interpreter."""
    schedule = "sum_out.block(x:16,k:2);sum_out.tensorize(x:0,k:0);sum_out.map(k:ki/3,ki,x)"
    module_path = tmp_path / "sum_split.py"
    result = run_dtc(CONFORMANCE / "l3_17_sum.dt", "-o", module_path, "--schedule", schedule)
    assert result.returncode == 0, result.stderr
    script = (
        "import sys, torch\n"
        f"sys.path.insert(0, {str(pathlib.Path(__file__).resolve().parent.parent)!r})\n"
        "from conftest import load_module, check_module\n"
        "from oracles import ORACLES\n"
        f"check_module(load_module(__import__('pathlib').Path({str(module_path)!r})),"
        " {'x': 39, 'k': 27}, torch.float32, oracle=ORACLES['l3_17_sum'])\n")
    child = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           timeout=300, env={**os.environ, "TRITON_INTERPRET": "1"})
    assert child.returncode == 0, child.stderr[-3000:]


def _child_main(workdir, ids):
    params = {p.id: p.values for p in _params()}
    print("READY", flush=True)
    for n, test_id in enumerate(ids):
        case, dtype, index = params[test_id]
        case_dir = pathlib.Path(workdir) / f"case{os.getpid()}_{n}"
        case_dir.mkdir()
        try:
            run_case(case_dir, case, dtype, index)
            message = None
        except AssertionError as e:
            message = str(e)
        except Exception as e:  # noqa: BLE001 - reported to the parent as a failure
            message = f"{type(e).__name__}: {e}"
        print("RESULT", test_id, json.dumps(message), flush=True)


if __name__ == "__main__":
    _child_main(sys.argv[1], sys.argv[2:])
