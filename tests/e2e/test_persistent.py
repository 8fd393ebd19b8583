"""persistent(ORDER) (docs/language.md, Persistent programs): at most one program instance per
multiprocessor (3 under the interpreter), each looping over output blocks in `map`'s order,
interleaved or in runs. Every block is computed once whatever the number of blocks (none, fewer
than the instances, not a multiple of them), under map's groups and splits, for products, row
reductions and split reductions; checked against torch written here. Compiled for sm_90 the
product stays on the Hopper tensor cores."""
import pytest
import torch

from conftest import MATMUL, ROOT, compile_source, load_module, run_dtc
from hopper import compile_for_hopper

RMSNORM = (ROOT / "templates" / "rmsnorm.dt").read_text()
ROW_SUM = """Func s;
In A;
Var x;
RVar k;
s[x] = rsum(A[x, k], k);
s.compile();
"""
ORDERS = ["interleaved", "blocked"]


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("map_", ["map(n, m)", "map(m:mi/2, n, mi)", "map(n:ni/4, m, ni)"])
def test_products_cover_every_block_once(tmp_path, order, map_):
    module, text = compile_source(tmp_path, MATMUL, f"c.block(m:16, n:32); "
                                  f"c.tensorize(m:0, n:0, k:16); c.{map_}; c.persistent({order}); "
                                  "c.compile()")
    assert "for pid in range(" in text and "tl.num_programs(0)" in text
    assert "_dt_programs(device, " in text
    # 0 blocks, 1, fewer than the 3 instances, many and not a multiple of 3 (with the map's
    # groups running past the last block), whole tiles.
    for m, n, k in [(0, 5, 3), (3, 7, 5), (17, 40, 9), (70, 101, 33), (64, 96, 32)]:
        A, B = torch.randn(m, k, dtype=torch.float64), torch.randn(k, n, dtype=torch.float64)
        whole = torch.full((m + 1, n + 3), -7.0)
        got = module.c(A.float(), B.float(), out=whole[:m, :n])
        want = A @ B
        torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-4)
        # Nothing past the output is written.
        assert (whole[m:] == -7.0).all() and (whole[:, n:] == -7.0).all()


@pytest.mark.parametrize("order", ORDERS)
def test_flattened_products(tmp_path, order):
    """persistent(ORDER, flatten): the loop over blocks is a tl.range Triton fuses with the k
    loop; the same blocks, each once."""
    module, text = compile_source(tmp_path, MATMUL, "c.block(m:16, n:32); "
                                  "c.tensorize(m:0, n:0, k:16); c.map(n:ni/2, m, ni); "
                                  f"c.persistent({order}, flatten)")
    assert "for pid in tl.range(" in text and ", flatten=True):" in text
    for m, n, k in [(0, 5, 3), (17, 40, 9), (70, 101, 33)]:
        A, B = torch.randn(m, k, dtype=torch.float64), torch.randn(k, n, dtype=torch.float64)
        whole = torch.full((m + 1, n + 3), -7.0)
        got = module.c(A.float(), B.float(), out=whole[:m, :n])
        torch.testing.assert_close(got.double(), A @ B, rtol=1e-4, atol=1e-4)
        assert (whole[m:] == -7.0).all() and (whole[:, n:] == -7.0).all()


@pytest.mark.parametrize("order", ORDERS)
def test_row_reductions(tmp_path, order):
    module, text = compile_source(tmp_path, RMSNORM, "rms_norm_out.block(x:2); "
                                  "rms_norm_out.tensorize(x:0, y:0, k:0); "
                                  f"rms_norm_out.persistent({order}); rms_norm_out.compile()")
    assert "for pid in range(" in text
    for rows in [1, 5, 11]:
        X, W = torch.randn(rows, 40, dtype=torch.float64), torch.randn(40, dtype=torch.float64)
        want = X * torch.rsqrt((X * X).mean(-1, keepdim=True) + 1e-6) * W
        got = module.rms_norm_out(X.float(), W.float(), 1e-6, 0.0)
        torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("order", ORDERS)
def test_split_reductions(tmp_path, order):
    """A blocked reduction: the partial sums' kernel and the combining kernel are both
    persistent, over their own blocks."""
    module, text = compile_source(tmp_path, ROW_SUM, "s.block(x:2, k:16); s.tensorize(x:0, k:0); "
                                  f"s.persistent({order}); s.compile()")
    assert text.count("for pid in range(") == 2
    for rows, cols in [(1, 5), (7, 50), (13, 129)]:
        A = torch.randn(rows, cols, dtype=torch.float64)
        torch.testing.assert_close(module.s(A.float()).double(), A.sum(1), rtol=1e-5, atol=1e-5)


def test_canonical_text_and_the_default(tmp_path):
    src = tmp_path / "c.dt"
    src.write_text(MATMUL)
    base = "c.block(m:16, n:32); c.tensorize(m:0, n:0, k:16); "
    for given, printed in [("c.persistent(blocked); ", "c.persistent(blocked)"),
                           ("c.persistent(interleaved, flatten); ",
                            "c.persistent(interleaved,flatten)"),
                           ("c.persistent(none); ", None), ("", None)]:
        r = run_dtc(src, "--canonical", "--schedule", base + given + "c.compile()")
        assert r.returncode == 0, r.stderr
        assert (printed in r.stdout) if printed else "persistent" not in r.stdout, r.stdout


@pytest.mark.parametrize("order", ORDERS + [f"{o}, flatten" for o in ORDERS])
def test_a_persistent_product_compiles_for_hopper(tmp_path, order):
    """The product at 128x128 tiles in float16, persistent: on the wgmma tensor cores, its loop
    over blocks around the k loop (or fused with it), nothing spilled."""
    out = tmp_path / "c.py"
    src = tmp_path / "c.dt"
    src.write_text(MATMUL)
    r = run_dtc(src, "-o", out, "--schedule", "c.block(m:128, n:128); "
                "c.tensorize(m:0, n:0, k:64); c.map(n:ni/8, m, ni); "
                f"c.persistent({order}); c.num_warps(8); c.compile()")
    assert r.returncode == 0, r.stderr
    compiled = compile_for_hopper(out, "c_kernel", "fp16", num_warps=8, num_stages=3)
    ptx = compiled["ptx"]
    assert ptx.count("wgmma.mma_async") >= 1 and "nctaid.x" in ptx
    assert "ld.local" not in ptx and "st.local" not in ptx
