"""The code shapes of thesis 3.3.1.5 and 3.3.2 (fusion with and without a temporary, split and
atomic reductions, tl.dot and its precision) checked in the emitted module, and each module run
under the Triton interpreter against its reference and a hand-written oracle (tests/oracles.py)."""
import pathlib

import pytest
import torch

from conftest import CONFORMANCE, check_module, file_sizes, load_module, run_dtc
from oracles import EXTRA, ORACLES


def compile_text(tmp_path, source_file, schedule=None):
    out = tmp_path / "module.py"
    args = [source_file, "-o", out] + (["--schedule", schedule] if schedule else [])
    result = run_dtc(*args)
    assert result.returncode == 0, result.stderr
    return out.read_text(), load_module(out)


def run_sizes(module, sizes, oracle):
    for dtype in (torch.float32, torch.float16):
        check_module(module, sizes, dtype, oracle=oracle)
        check_module(module, {k: v + 3 for k, v in sizes.items()}, dtype, oracle=oracle)


def test_partial_fusion_uses_a_global_temporary(tmp_path):
    # Listing 3.14: tmp fused at x, y not fully tensorized.
    text, module = compile_text(tmp_path, CONFORMANCE / "l3_14_swish_fuse_x.dt")
    assert "work, (tmp_fuse,) = plan.lay_out(device, ((x, y),))" in text
    assert "tl.store(tmp_fuse_ptr" in text and "tl.load(tmp_fuse_ptr" in text
    assert "tl.debug_barrier()" in text
    assert "def tmp_kernel" not in text  # no kernel of its own
    run_sizes(module, file_sizes(CONFORMANCE / "l3_14_swish_fuse_x.dt"),
              ORACLES["l3_14_swish_fuse_x"])


@pytest.mark.parametrize("name", ["l3_13_swish_fuse_y", "l3_15_swish_fuse_x_tensorized"])
def test_full_fusion_needs_no_temporary(tmp_path, name):
    # Listings 3.13 and 3.15: tmp computed where it is used.
    text, module = compile_text(tmp_path, CONFORMANCE / f"{name}.dt")
    assert "tmp_fuse" not in text and "def tmp_kernel" not in text
    assert "tl.sigmoid(beta * A)" in text
    run_sizes(module, file_sizes(CONFORMANCE / f"{name}.dt"), ORACLES[name])


def test_unfused_chain_launches_kernels_in_dependency_order(tmp_path):
    # Listing 3.7: exp_A, then sum_exp_A, then softmax_out, temporaries in the wrapper.
    text, module = compile_text(tmp_path, CONFORMANCE / "l3_03_softmax.dt")
    wrapper = text[text.index("def softmax_out("):]
    order = [wrapper.index(", " + k + ", (") for k in ("exp_A_kernel", "sum_exp_A_kernel", "softmax_out_kernel")]
    assert order == sorted(order)
    assert "work, (exp_A, sum_exp_A) = plan.lay_out(device, ((x, y), (x,)))" in wrapper
    run_sizes(module, file_sizes(CONFORMANCE / "l3_03_softmax.dt"), ORACLES["l3_03_softmax"])


def test_fused_row_reduction_runs_once_per_row_block(tmp_path):
    # Listing 4.2: _sum fused at x is computed before the y work of each row block.
    text, module = compile_text(tmp_path, CONFORMANCE / "l4_02_softmax.dt")
    assert "def _sum_kernel" not in text
    kernel = text[text.index("def _softmax_kernel"):text.index("def _dt_args")]
    assert kernel.count("tl.sum(") == 1
    run_sizes(module, file_sizes(CONFORMANCE / "l4_02_softmax.dt"), ORACLES["l4_02_softmax"])


def test_split_reduction_is_two_kernels(tmp_path):
    # Listings 3.20 and 3.21.
    text, module = compile_text(tmp_path, CONFORMANCE / "l3_20_sum_block_reduction.dt")
    assert "def sum_out_partial_kernel" in text and "def sum_out_kernel" in text
    assert "k_parts = (k + 31) // 32" in text
    assert text.index(", sum_out_partial_kernel, (") < text.index(", sum_out_kernel, (")
    run_sizes(module, {"x": 4, "k": 128}, ORACLES["l3_20_sum_block_reduction"])


@pytest.mark.parametrize("op,atomic", [("rsum", "add"), ("rmax", "max"), ("rmin", "min")])
def test_atomic_reduction(tmp_path, op, atomic):
    source = tmp_path / "r.dt"
    source.write_text(f"Func r; In A; Var x; RVar k;\nr[x] = {op}(A[x, k], k);\n"
                      "r.block(x:2, k:16); r.tensorize(k:4); r.atomic(k); r.compile();\n")
    text, module = compile_text(tmp_path, source)
    assert f"tl.atomic_{atomic}(" in text and "def r_partial_kernel" not in text
    assert "r = torch.full((x,)" in text
    run_sizes(module, {"x": 5, "k": 45}, EXTRA[op])


def test_rdot_uses_tl_dot_with_the_chosen_precision(tmp_path):
    source = pathlib.Path(__file__).resolve().parent.parent / "gpu" / "matmul.dt"
    text, module = compile_text(tmp_path, source)
    assert "tl.dot(A_tile, B_tile, k_acc)" in text and module.DOT_PRECISION == "tf32"
    canonical = run_dtc(source, "--canonical").stdout.strip()
    text, module = compile_text(tmp_path, source, canonical + "; C.precision(ieee)")
    assert 'input_precision="ieee"' in text and module.DOT_PRECISION == "ieee"
    run_sizes(module, {"m": 33, "n": 20, "k": 50}, EXTRA["matmul"])


def test_rdot_without_tensorization_is_a_loop(tmp_path):
    source = tmp_path / "mm.dt"
    source.write_text("Func c; In A, B; Var m, n; RVar k;\nc[m, n] = rdot(A[m, k], B[k, n], k);\n"
                      "c.compile();\n")
    text, module = compile_text(tmp_path, source)
    assert "tl.dot(" not in text and module.DOT_PRECISION is None
    run_sizes(module, {"m": 3, "n": 4, "k": 5}, EXTRA["matmul"])


def test_program_id_in_an_expression(tmp_path):
    # Each program instance writes its own index: blocks of 4 along x, first dimension fastest.
    source = tmp_path / "pid.dt"
    source.write_text("Func f; In A; Var x;\nf[x] = A[x] * 0 + program_id(0);\n"
                      "f.block(x:4); f.tensorize(x:0); f.compile();\n")
    text, module = compile_text(tmp_path, source)
    (a,) = module.make_inputs({"x": 10})
    got = module.f(a)
    assert got.tolist() == [0.0] * 4 + [1.0] * 4 + [2.0] * 2
    with pytest.raises(ValueError, match="program_id"):
        module.reference(a)


def test_a_product_inside_a_whole_tile_reduction_is_computed_once_per_block(tmp_path):
    """2mm: the first product varies along l, the second product's reduction label. With l one
    whole tile it is computed before the loop over n tiles, once per m block; with l in steps
    (a loop) it stays inside that loop."""
    src = tmp_path / "2mm.dt"
    src.write_text("Func o; In A, B, C; Var m, n; RVar k, l;\n"
                   "o[m, n] = rdot(rdot(A[m, k], B[k, l], k), C[l, n], l);\n"
                   "o.block(m:16); o.tensorize(m:16, n:16, k:16, l:LSTEP);\n"
                   "o.compile();\n")
    sizes = {"m": 20, "k": 24, "l": 40, "n": 50}
    for lstep, hoisted in (("0", True), ("16", False)):
        text = src.read_text().replace("LSTEP", lstep)
        (tmp_path / f"p{lstep}.dt").write_text(text)
        out = tmp_path / f"p{lstep}.py"
        assert run_dtc(tmp_path / f"p{lstep}.dt", "-o", out).returncode == 0
        code = out.read_text()
        first = code.index("# rdot over k on tl.dot")
        assert (first < code.index("for n_iter in range")) == hoisted, code
        module = load_module(out)
        A, B, C = (torch.randn(sizes[a], sizes[b]) for a, b in (("m", "k"), ("k", "l"), ("l", "n")))
        want = (A.double() @ B.double()) @ C.double()
        torch.testing.assert_close(module.o(A, B, C).double(), want, rtol=2e-3, atol=2e-3)
