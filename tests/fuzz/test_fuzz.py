"""The differential fuzzer (tests/fuzz/dtfuzz.py): its evaluator against hand-written torch, its
reducer on a synthetic failure, its generator against dtc, and a bounded fuzzing run.

The bounded run uses a fixed seed and a fixed number of cases (under a minute on two cores
when nothing fails; reducing failures adds up to 10 s each).
It fails, listing the reduced reproducers, when anything other than a correct result or an
ordinary rejection happens. Run it longer by hand (docs/architecture.md, "The differential
fuzzer"):

    .venv/bin/python tests/fuzz/dtfuzz.py --minutes 20 --seed 1 --out out/dtfuzz
"""
import math
import pathlib
import random
import sys

import pytest
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import dtfuzz  # noqa: E402
from dtfuzz import Case, Program  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0")

A_ = lambda *labels: ["acc", "A", list(labels)]  # noqa: E731
B_ = lambda *labels: ["acc", "B", list(labels)]  # noqa: E731


def evaluate(labels, inputs, funcs, sizes, sins=(), seed=0):
    """Evaluates the last Func of a hand-written program; returns (value, the inputs)."""
    prog = Program(labels, inputs, list(sins), funcs, [funcs[-1][0]])
    assert dtfuzz.check_program(prog) is None, dtfuzz.check_program(prog)
    case = Case(prog, [], sizes, "float32", seed)
    ins, scalars = dtfuzz.make_case_inputs(case)
    out, _ = dtfuzz.evaluate(case)
    ins = {n: t.double() for n, t in ins.items()}
    return out[funcs[-1][0]], ins, scalars


def test_evaluator_transposed_matmul():
    """c[n, m] = rdot(A[m, k], B[k, n], k) is (A @ B)^T, whatever the order of the operands."""
    labels = {"m": "Var", "n": "Var", "k": "RVar"}
    sizes = {"m": 5, "n": 3, "k": 4}
    for a, b in ((A_("m", "k"), B_("k", "n")), (B_("k", "n"), A_("m", "k"))):
        got, ins, _ = evaluate(labels, {"A": ["m", "k"], "B": ["k", "n"]},
                               [["c", ["n", "m"], ["dot", a, b, "k"]]], sizes)
        torch.testing.assert_close(got, (ins["A"] @ ins["B"]).T)


def test_evaluator_label_alignment_and_scalars():
    """A[x, y] + B[y, x] transposes B; s * len(y) is a scalar; f[x, y, z] = A[x, y] repeats."""
    labels = {"x": "Var", "y": "Var", "z": "Var"}
    sizes = {"x": 3, "y": 4, "z": 2}
    e = ["bin", "+", ["bin", "+", A_("x", "y"), B_("y", "x")],
         ["bin", "*", ["sin", "s"], ["len", "y"]]]
    got, ins, sc = evaluate(labels, {"A": ["x", "y"], "B": ["y", "x"]},
                            [["f", ["z", "x", "y"], e]], sizes, sins=["s"])
    want = ins["A"] + ins["B"].T + sc["s"] * 4
    torch.testing.assert_close(got, want.unsqueeze(0).expand(2, 3, 4))


def test_evaluator_softmax_and_nested_reductions():
    labels = {"x": "Var", "y": "RVar", "j": "RVar"}
    sizes = {"x": 4, "y": 6, "j": 6}
    shifted = ["bin", "-", A_("x", "y"), ["red", "rmax", A_("x", "y"), "y"]]
    sm = ["bin", "/", ["call", "exp", [shifted]],
          ["red", "rsum", ["call", "exp", [shifted]], "y"]]
    got, ins, _ = evaluate(labels, {"A": ["x", "y"]}, [["sm", ["x", "y"], sm]], sizes)
    torch.testing.assert_close(got, torch.softmax(ins["A"], dim=1))
    # o[x] = sum_y A[x, y] * max_j A[x, j] * min_j t[y, j], with t[j, y] = exp(A[j, y]) read
    # transposed, so min_j t[y, j] = min_j exp(A[y, j]): reductions inside a reduction.
    inner = ["bin", "*", ["bin", "*", A_("x", "y"), ["red", "rmax", A_("x", "j"), "j"]],
             ["red", "rmin", ["acc", "t", ["y", "j"]], "j"]]
    got, ins, _ = evaluate(labels, {"A": ["x", "y"]},
                           [["t", ["j", "y"], ["call", "exp", [A_("j", "y")]]],
                            ["o", ["x"], ["red", "rsum", inner, "y"]]],
                           {"x": 6, "y": 6, "j": 6})
    a = ins["A"]
    want = (a * a.amax(1, keepdim=True) * torch.exp(a).amin(1)[None, :]).sum(1)
    torch.testing.assert_close(got, want)


def evaluate_whole(labels, inputs, funcs, sizes, ints=None, sin_ints=(), sin_values=None,
                   seed=0):
    """evaluate() for programs with integer inputs and scalars."""
    prog = Program(labels, inputs, list(sin_ints), funcs, [funcs[-1][0]], dict(ints or {}),
                   list(sin_ints), dict(sin_values or {}))
    assert dtfuzz.check_program(prog) is None, dtfuzz.check_program(prog)
    case = Case(prog, [], sizes, "float32", seed)
    ins, scalars = dtfuzz.make_case_inputs(case)
    out, _ = dtfuzz.evaluate(case)
    return out[funcs[-1][0]], ins, scalars


def test_evaluator_causal_mask_from_label_values():
    """s[m, l] = where(l <= m, A[m, l], -inf): labels' values are positions."""
    cond = ["bin", "<=", ["lab", "l"], ["lab", "m"]]
    e = ["call", "where", [cond, A_("m", "l"), ["neg", ["num", "inf"]]]]
    got, ins, _ = evaluate({"m": "Var", "l": "Var"}, {"A": ["m", "l"]}, [["s", ["m", "l"], e]],
                           {"m": 5, "l": 7})
    want = ins["A"].masked_fill(torch.ones(5, 7, dtype=torch.bool).triu(1), float("-inf"))
    assert torch.equal(got, want)


def test_evaluator_whole_division_rounds_toward_zero():
    """`//` and `%` of whole numbers as C: (y - 5) // 2, (y - 5) % -3, -7 // 2, and `/` true."""
    y = ["lab", "y"]
    ym5 = ["bin", "-", y, ["num", "5"]]
    e = ["bin", "+", ["bin", "*", ["bin", "//", ym5, ["num", "2"]], ["num", "100"]],
         ["bin", "%", ym5, ["neg", ["num", "3"]]]]
    e = ["bin", "+", e, ["bin", "*", ["bin", "//", ["neg", ["num", "7"]], ["num", "2"]],
                         ["bin", "/", y, ["num", "2"]]]]
    got, _, _ = evaluate({"y": "Var"}, {}, [["f", ["y"], e]], {"y": 11})
    yv = torch.arange(11)
    want = (torch.div(yv - 5, 2, rounding_mode="trunc") * 100 + torch.fmod(yv - 5, -3)
            + (-3) * (yv / 2))
    assert torch.equal(got, want.double())
    assert dtfuzz.is_whole(["bin", "+", ["num", "2"], ["num", "3"]], Program({}, {}, [], [], []))\
        is False and dtfuzz.is_whole(["bin", "+", y, ["num", "3"]], Program({}, {}, [], [], []))


def test_evaluator_gathers_shifts_and_whole_scalars():
    """g[x] = P[x, T[x]] + rsum(P[x, y + 2] * y, y) * n with In T: int(y) (positions outside
    0 .. 6 read 0), SIn n: int, and a general position P[x, 0] beside a plain read P[x, y]."""
    labels = {"x": "Var", "y": "RVar"}
    shift = ["red", "rsum", ["bin", "*", ["acc", "P", ["x", ["bin", "+", ["lab", "y"],
                                                             ["num", "2"]]]], ["lab", "y"]], "y"]
    e = ["bin", "+", ["acc", "P", ["x", ["acc", "T", ["x"]]]],
         ["bin", "*", shift, ["sin", "n"]]]
    e = ["bin", "+", e, ["red", "rsum", ["bin", "-", ["acc", "P", ["x", "y"]],
                                         ["acc", "P", ["x", ["num", "0"]]]], "y"]]
    sizes = {"x": 6, "y": 7}
    for seed in range(6):
        got, ins, sc = evaluate_whole(labels, {"P": ["x", "y"], "T": ["x"]}, [["g", ["x"], e]],
                                      sizes, ints={"T": "y"}, sin_ints=["n"], seed=seed)
        P, t = ins["P"].double(), ins["T"].long()
        assert ins["T"].dtype in dtfuzz.INT_DTYPES and isinstance(sc["n"], int)
        padded = torch.nn.functional.pad(P, (0, 9))
        inside = (t >= 0) & (t < 7)
        gathered = torch.where(inside, padded[torch.arange(6), t.clamp(0, 7)], 0.0)
        shifted = (padded[:, 2:9] * torch.arange(7)).sum(1)
        want = gathered + shifted * sc["n"] + (P - P[:, :1]).sum(1)
        torch.testing.assert_close(got, want)
    # the written value of a scalar is the one passed
    got, _, sc = evaluate_whole({"x": "Var"}, {}, [["f", ["x"], ["sin", "n"]]], {"x": 2},
                                sin_ints=["n"], sin_values={"n": "-100"})
    assert sc["n"] == -100 and got.tolist() == [-100.0, -100.0]


def test_evaluator_reductions_over_empty_dimensions():
    labels = {"x": "Var", "k": "RVar"}
    for op, want in (("rsum", 0.0), ("rmax", -math.inf), ("rmin", math.inf)):
        got, _, _ = evaluate(labels, {"A": ["x", "k"]},
                             [["o", ["x"], ["red", op, A_("x", "k"), "k"]]], {"x": 3, "k": 0})
        assert got.tolist() == [want] * 3


def test_evaluator_builtins_against_torch():
    """The evaluator's own formulas for every element-wise builtin against torch's functions."""
    g = torch.Generator().manual_seed(0)
    v = torch.randn(200, generator=g, dtype=torch.float64) * 2
    w = torch.randn(200, generator=g, dtype=torch.float64)
    pos = v.abs() + 0.1
    F = torch.nn.functional
    checks = {
        "abs": ([v], v.abs()), "ceil": ([v], v.ceil()), "floor": ([v], v.floor()),
        "cos": ([v], v.cos()), "sin": ([v], v.sin()), "erf": ([v], torch.erf(v)),
        "erfc": ([v], torch.erfc(v)), "exp": ([v], v.exp()), "exp2": ([v], torch.exp2(v)),
        "log": ([pos], pos.log()), "log2": ([pos], pos.log2()), "log10": ([pos], pos.log10()),
        "log1p": ([pos], pos.log1p()), "expm1": ([v], v.expm1()), "sqrt": ([pos], pos.sqrt()),
        "sqrt_rn": ([pos], pos.sqrt()), "rsqrt": ([pos], pos.rsqrt()),
        "sigmoid": ([v], torch.sigmoid(v)), "maximum": ([v, w], torch.maximum(v, w)),
        "minimum": ([v, w], torch.minimum(v, w)), "fdiv": ([v, pos], v / pos),
        "div_rn": ([v, pos], v / pos), "clamp": ([v, w - 1, w + 1], torch.clamp(v, w - 1, w + 1)),
        "fma": ([v, w, pos], torch.addcmul(pos, v, w)),
        "where": ([(v > 0).double(), v, w], torch.where(v > 0, v, w)),
        "tanh": ([v], v.tanh()), "sinh": ([v], v.sinh()), "cosh": ([v], v.cosh()),
        "tan": ([v], v.tan()), "pow": ([pos, w], pos ** w), "sign": ([v], v.sign()),
        "reciprocal": ([pos], pos.reciprocal()), "square": ([v], v.square()),
        "relu": ([v], F.relu(v)), "silu": ([v], F.silu(v)), "softplus": ([v], F.softplus(v)),
        "gelu": ([v], F.gelu(v)), "gelu_tanh": ([v], F.gelu(v, approximate="tanh")),
    }
    assert set(checks) == set(dtfuzz.ARITY)
    for name, (args, want) in checks.items():
        assert len(args) == dtfuzz.ARITY[name]
        torch.testing.assert_close(dtfuzz._bf(name, args), want, msg=name)
    # pow of a negative base: NaN for a non-integer exponent, signed for an odd one
    assert math.isnan(dtfuzz._bf("pow", [torch.tensor(-2.0), torch.tensor(2.5)]).item())
    assert dtfuzz._bf("pow", [torch.tensor(-2.0), torch.tensor(3.0)]).item() == -8.0


def test_evaluator_maxima_and_minima_propagate_nan():
    """NaN in maximum, minimum, clamp, relu, rmax and rmin is NaN, as torch computes it and the
    kernels do (docs/language.md), and is compared exactly, not set aside as uncertain."""
    nan = float("nan")
    v = torch.tensor([nan, 1.0, -2.0, nan], dtype=torch.float64)
    w = torch.tensor([0.5, nan, -3.0, nan], dtype=torch.float64)
    for name, args in (("maximum", [v, w]), ("minimum", [v, w]), ("relu", [v]),
                       ("clamp", [v, w, w + 1])):
        got = dtfuzz._bf(name, args)
        want = torch.stack([torch.isnan(a) for a in args]).any(0)
        assert torch.isnan(got).tolist() == want.tolist(), name
    labels = {"x": "Var", "k": "RVar"}
    plus1 = ["bin", "+", A_("x", "k"), ["num", 1.0]]
    for op in ("rmax", "rmin"):
        prog = Program(labels, {"A": ["x", "k"]}, [],
                       [["o", ["x"], ["red", op, ["call", "log", [plus1]], "k"]]], ["o"])
        case = Case(prog, [], {"x": 8, "k": 3}, "float32", 3)
        expected, ev = dtfuzz.evaluate(case)
        ins, _ = dtfuzz.make_case_inputs(case)
        has_nan = (ins["A"] < -1).any(1)         # log of a negative number is NaN
        assert bool(has_nan.any()) and not bool(has_nan.all())
        assert torch.isnan(expected["o"]).tolist() == has_nan.tolist()
        assert not bool(ev.uncertain["o"].any())
        # A kernel that skips the NaN (tl.max does) is wrong.
        logs = (ins["A"].double() + 1).log()
        skipped = (logs.nan_to_num(nan=-math.inf).amax(1) if op == "rmax"
                   else logs.nan_to_num(nan=math.inf).amin(1))
        assert "wrong" in dtfuzz.compare(case, "o", skipped, expected["o"], ev.uncertain["o"],
                                         ev.max_abs)
        assert dtfuzz.compare(case, "o", expected["o"], expected["o"], ev.uncertain["o"],
                              ev.max_abs) is None


def test_compare_allows_the_rounding_of_a_sum_that_cancels():
    """f[v] = rsum(A[v, u] - A[u, v], u) summed over v is exactly 0: a float32 kernel keeps the
    rounding of its terms, which the output's own magnitude cannot bound; an error the size of
    the terms is still wrong."""
    labels = {"v": "RVar", "u": "RVar", "k": "Var"}
    funcs = [["f", ["k"], ["red", "rsum", ["bin", "*", ["len", "k"], ["red", "rsum", [
        "bin", "-", A_("u", "v"), A_("v", "u")], "u"]], "v"]]]
    prog = Program(labels, {"A": ["u", "v"]}, [], funcs, ["f"])
    case = Case(prog, [], {"v": 13, "u": 13, "k": 7}, "float32", 5)
    expected, ev = dtfuzz.evaluate(case)
    assert float(expected["f"].abs().max()) == 0.0 and ev.max_abs > 10
    rounding = torch.full_like(expected["f"], 2e-5)
    assert dtfuzz.compare(case, "f", rounding, expected["f"], max_abs=ev.max_abs) is None
    assert "wrong" in dtfuzz.compare(case, "f", rounding * 1e4, expected["f"],
                                     max_abs=ev.max_abs)


def test_compare_accepts_dot_operands_in_the_inputs_dtype():
    """In float16 a tl.dot operand computed in the kernel (A[m, k] + A[m, k] * 0.3) is rounded
    to float16 first (docs/language.md): that result matches, a wrong product does not."""
    labels = {"m": "Var", "n": "Var", "k": "RVar"}
    operand = ["bin", "+", A_("m", "k"), ["bin", "*", A_("m", "k"), ["num", "0.3"]]]
    funcs = [["c", ["m", "n"], ["call", "sin", [["bin", "*", ["dot", operand, B_("k", "n"), "k"],
                                                       ["num", "3"]]]]]]
    prog = Program(labels, {"A": ["m", "k"], "B": ["k", "n"]}, [], funcs, ["c"])
    for seed in range(20):
        case = Case(prog, [], {"m": 8, "n": 8, "k": 16}, "float16", seed)
        expected, ev = dtfuzz.evaluate(case)
        kernel, _ = dtfuzz.evaluate(case, dtype=torch.float32, dot_dtype=torch.float16)
        got = kernel["c"].to(torch.float16)
        assert dtfuzz.compare(case, "c", got, expected["c"], max_abs=ev.max_abs) is None
        wrong = got.double().clone()
        wrong[0, 0] += 0.05
        assert "1 of 64 elements wrong" in dtfuzz.compare(case, "c", wrong, expected["c"],
                                                           max_abs=ev.max_abs)


def test_printed_programs_parse_back_as_written():
    """Minimal parentheses keep the tree: `a - (b - c)`, `(a < b) < c`, `-(a + b)`."""
    e = ["bin", "-", A_("x"), ["bin", "-", B_("x"), ["num", "1"]]]
    assert dtfuzz.expr_text(e) == "A[x] - (B[x] - 1)"
    e = ["bin", "<", ["bin", "<", A_("x"), B_("x")], ["num", "2"]]
    assert dtfuzz.expr_text(e) == "A[x] < B[x] < 2"
    e = ["bin", "*", ["neg", ["bin", "+", A_("x"), B_("x")]], ["bin", "/", A_("x"), B_("x")]]
    assert dtfuzz.expr_text(e) == "-(A[x] + B[x]) * (A[x] / B[x])"


def test_generated_programs_are_legal(tmp_path):
    """dtc accepts every generated program with its default schedule (so rejections in the
    fuzzing run come from schedules), and the evaluator agrees on the labels dtc infers."""
    rng = random.Random(11)
    for i in range(25):
        case = dtfuzz.generate_program_and_sizes(rng)
        assert case is not None
        src = tmp_path / f"p{i}.dt"
        src.write_text(dtfuzz.program_text(case.program))
        result = dtfuzz.subprocess.run([str(dtfuzz.DTC), str(src), "--check"],
                                       capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, src.read_text() + result.stderr


def test_reducer_shrinks_a_synthetic_failure(tmp_path):
    """A fake failure, "an rdot and a tensorize statement", shrinks to about the smallest program
    and schedule that still have both."""
    rng = random.Random(5)
    while True:
        case = dtfuzz.generate_program_and_sizes(rng)
        case.schedule = dtfuzz.gen_schedule(rng, case.program, case.sizes)
        nodes = sum(dtfuzz._size(f[2]) for f in case.program.funcs)
        if (any(dtfuzz.has_dot(f[2]) for f in case.program.funcs) and nodes > 12
                and any(".tensorize(" in s for s in case.schedule)
                and len(case.schedule) > 2):
            break

    def runner(c):
        failing = (any(dtfuzz.has_dot(f[2]) for f in c.program.funcs)
                   and any(".tensorize(" in s for s in c.schedule))
        return dtfuzz.Result(dtfuzz.WRONG, "synthetic", "synthetic") if failing \
            else dtfuzz.Result(dtfuzz.OK)

    target = (dtfuzz.WRONG, "synthetic")
    reduced, res = dtfuzz.reduce_case(case, runner(case), target, tmp_path, budget_s=60,
                                      runner=runner)
    assert res.outcome == dtfuzz.WRONG
    assert len(reduced.schedule) == 1 and ".tensorize(" in reduced.schedule[0]
    # rdot(I[k], I[k], k), or with no input left, f0[k] = 1 and rdot(f0[k], f0[k], k)
    assert len(reduced.program.funcs) <= 2
    assert sum(dtfuzz._size(f[2]) for f in reduced.program.funcs) <= 4
    assert all(s <= 2 for s in reduced.sizes.values())


N_CASES = 120
SEED = 20240601


def test_bounded_fuzzing_run(tmp_path):
    """A fixed-seed fuzzing run: only correct results and ordinary rejections are allowed."""
    if not dtfuzz.DTC.exists():
        pytest.fail(f"{dtfuzz.DTC} is not built")
    torch.set_num_threads(1)
    logs = []
    stats = dtfuzz.fuzz(seed=SEED, max_cases=N_CASES, out_dir=tmp_path / "out",
                        reduce_budget_s=10, max_reduced_per_class=3, log=logs.append,
                        workdir=tmp_path)
    assert stats.cases == N_CASES
    assert stats.outcomes[dtfuzz.OK] >= N_CASES // 3, stats.summary()
    failures = {k: v for k, v in stats.outcomes.items() if k not in (dtfuzz.OK, dtfuzz.REJECTED)}
    if failures or stats.extra:
        report = [stats.summary(), ""]
        for f in stats.findings:
            stem = tmp_path / "out" / f["stem"]
            report += [f"--- {f['stem']}.dt", stem.with_suffix(".dt").read_text(),
                       stem.with_suffix(".txt").read_text().split("\noriginal")[0]]
        pytest.fail("\n".join(report), pytrace=False)


def test_bounded_attention_run(tmp_path, monkeypatch):
    """FlashAttention chains scheduled as the Gluon form asks (dtfuzz --attention-rate), their
    Gluon kernels compiled for sm_90 as well (--hopper): correct under the interpreter, compiled,
    or rejected with a diagnostic; and the online loop's Gluon kernel reached."""
    if not dtfuzz.DTC.exists():
        pytest.fail(f"{dtfuzz.DTC} is not built")
    torch.set_num_threads(1)
    monkeypatch.setattr(dtfuzz, "ONLINE_RATE", 1.0)
    monkeypatch.setattr(dtfuzz, "ATTENTION_RATE", 1.0)
    monkeypatch.setattr(dtfuzz, "HOPPER_COMPILE", True)
    stats = dtfuzz.fuzz(seed=SEED, max_cases=24, out_dir=tmp_path / "out", reduce_budget_s=10,
                        max_reduced_per_class=2, log=lambda *_: None, workdir=tmp_path)
    assert stats.coverage["gluon online"] >= 4, stats.summary()
    assert stats.coverage["pipelined update"] >= 4, stats.summary()
    failures = {k: v for k, v in stats.outcomes.items() if k not in (dtfuzz.OK, dtfuzz.REJECTED)}
    assert not failures and not stats.extra, stats.summary()
