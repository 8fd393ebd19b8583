"""The generated code depends on the canonical schedule alone: a schedule and its canonical text
(`dtc --canonical`) compile to the same module, character for character. The canonical form
drops what cannot matter (the statements of a Func fused into another with no kernel of its
own, but its fuse_at), so such statements must not reach the code either."""
import random

import pytest

from conftest import CONFORMANCE, run_dtc
from schedule_gen import ALGORITHMS, random_schedule

FUSED_SUM = ("Func t, o; In A; Var x, y; RVar k;\nt[x] = rsum(A[x, k], k);\n"
             "o[x, y] = t[x] + A[x, y];\no.compile();\n")


def compile_text(tmp_path, source_file, schedule, name):
    out = tmp_path / f"{name}.py"
    result = run_dtc(source_file, "-o", out, "--schedule", schedule)
    if result.returncode != 0:
        return None, result.stderr
    return out.read_text(), result.stderr


def canonical(source_file, schedule):
    result = run_dtc(source_file, "--canonical", "--schedule", schedule)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


@pytest.mark.parametrize("extra", ["t.block(k:4)", "t.block(k:4); t.atomic(k)", "t.block(x:2)",
                                   "t.tensorize(k:0)", "t.block(k:4); t.tensorize(k:2)",
                                   "t.num_warps(8); t.num_stages(2); t.index(int64)"])
def test_statements_of_a_fused_func_change_no_code(tmp_path, extra):
    src = tmp_path / "fused.dt"
    src.write_text(FUSED_SUM)
    plain = "o.block(x:2); o.tensorize(y:0); t.fuse_at(o, x)"
    assert canonical(src, plain + "; " + extra) == canonical(src, plain)
    want, err = compile_text(tmp_path, src, plain, "plain")
    assert want is not None, err
    got, err = compile_text(tmp_path, src, plain + "; " + extra, "extra")
    assert got is not None, err
    assert got == want


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_a_schedule_and_its_canonical_text_give_one_module(tmp_path, name):
    src = CONFORMANCE / f"{name}.dt"
    rng = random.Random(f"canonical-{name}")
    compared = 0
    for i in range(30):
        schedule = random_schedule(name, rng)
        # Statements of fused Funcs that the canonical text drops (an RVar's block included).
        for f, (dims, rvars) in ALGORITHMS[name]["funcs"].items():
            if f"{f}.fuse_at(" not in schedule:
                continue
            if f"{f}.block(" not in schedule and f"{f}.tensorize(" not in schedule:
                schedule += f"; {f}.block({rng.choice(rvars or dims)}:4)"
            if f"{f}.num_warps(" not in schedule:
                schedule += f"; {f}.num_warps(2)"
        module, _ = compile_text(tmp_path, src, schedule, f"s{i}")
        if module is None:
            continue  # rejected: the generator is generous
        text = canonical(src, schedule)
        again, err = compile_text(tmp_path, src, text, f"c{i}")
        assert again is not None, f"{schedule!r} -> {text!r}: {err}"
        assert again == module, f"{schedule!r} and its canonical text {text!r} differ"
        compared += 1
    assert compared >= 5, compared
