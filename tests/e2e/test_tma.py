"""tma(A, ...) (docs/language.md, Tensor descriptors): a product's operand tiles loaded through
tensor descriptors where the wrapper finds the tensor qualifies (2-D, last stride 1, the other
stride and the address multiples of 16 bytes), through pointers where it does not; the same
results either way, checked against torch written here under the interpreter, which validates
descriptors as the hardware does. Compiled for sm_90 the loads are TMA copies."""
import pytest
import torch

from conftest import MATMUL, compile_source, run_dtc
from hopper import compile_for_hopper

# B read as [n, k]: its tiles are the descriptor's blocks transposed.
MATMUL_NT = MATMUL.replace("B[k, n]", "B[n, k]")
SCHEDULE = ("c.block(m:32, n:64); c.tensorize(m:0, n:0, k:16); c.map(n:ni/2, m, ni); "
            "c.tma(A, B); c.compile()")


def _counted(monkeypatch, method):
    """A list that grows by one each time the interpreter runs InterpreterBuilder.`method`."""
    from triton.runtime import interpreter
    calls = []
    original = getattr(interpreter.InterpreterBuilder, method)

    def counting(self, *args, **kwargs):
        calls.append(1)
        return original(self, *args, **kwargs)
    monkeypatch.setattr(interpreter.InterpreterBuilder, method, counting)
    return calls


@pytest.fixture
def descriptors_made(monkeypatch):
    """How many tensor descriptors the interpreter makes (each program instance makes its own)."""
    return _counted(monkeypatch, "create_make_tensor_descriptor")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("source", [MATMUL, MATMUL_NT], ids=["nn", "nt"])
def test_products_through_descriptors(tmp_path, dtype, source, descriptors_made):
    module, text = compile_source(tmp_path, source, SCHEDULE)
    assert "tl.make_tensor_descriptor(A_ptr, [m_size, k_size], [A_stride0, 1], [32, 16])" in text
    assert ".load([" in text and "if A_TMA else tl.load(" in text
    nt = "B[n, k]" in source
    # Rows of 48 and 64 elements are 16-byte multiples in every dtype: descriptors, including
    # for the partial tiles past 70 rows, 100 columns and 40 k (read as 0 there).
    for m, n, k in [(70, 100, 48), (64, 128, 64)]:
        A = torch.randn(m, k).to(dtype)
        B = torch.randn(n, k).to(dtype) if nt else torch.randn(k, n).to(dtype)
        made = len(descriptors_made)
        got = module.c(A, B)
        assert len(descriptors_made) > made, "no descriptor made"
        want = A.double() @ (B.double().t() if nt else B.double())
        torch.testing.assert_close(got.double(), want.to(dtype).double(), rtol=2e-2, atol=2e-2)


def test_a_tensor_that_does_not_qualify_is_read_through_pointers(tmp_path, descriptors_made):
    module, _ = compile_source(tmp_path, MATMUL, SCHEDULE)
    A = torch.randn(33, 7, dtype=torch.float16)      # rows of 14 bytes
    Bt = torch.randn(40, 7, dtype=torch.float16).t()  # last stride 7
    offset = torch.randn(33 * 8 + 1, dtype=torch.float16)[1:].view(33, 8)  # 2-byte aligned
    # (A, B, whether B qualifies): A never does; B contiguous with rows of 80 bytes does.
    for a, b, b_qualifies in [(A, Bt.contiguous(), True), (A, Bt, False),
                              (offset, torch.randn(8, 33).half(), False)]:
        made = len(descriptors_made)
        got = module.c(a, b)
        torch.testing.assert_close(got.double(), (a.double() @ b.double()).half().double(),
                                   rtol=2e-2, atol=2e-2)
        assert (len(descriptors_made) > made) == b_qualifies


@pytest.mark.parametrize("persistent", ["none", "interleaved"])
def test_with_an_epilogue_and_persistent_programs(tmp_path, persistent, descriptors_made):
    from conftest import ROOT
    source = (ROOT / "templates" / "gemm_epilogue.dt").read_text()
    module, _ = compile_source(tmp_path, source, "out.block(m:64, n:32); "
                               "out.tensorize(m:0, n:0, k:16); mm.fuse_at(out, n); "
                               f"out.tma(A, W); out.persistent({persistent}); out.compile()")
    A, W, bias = torch.randn(90, 64).half(), torch.randn(64, 72).half(), torch.randn(72).half()
    got = module.out(A, W, bias)
    want = torch.nn.functional.gelu(A.double() @ W.double() + bias.double())
    torch.testing.assert_close(got.double(), want.half().double(), rtol=2e-2, atol=2e-2)
    assert descriptors_made


def test_canonical_text(tmp_path):
    src = tmp_path / "c.dt"
    src.write_text(MATMUL)
    r = run_dtc(src, "--canonical", "--schedule", SCHEDULE.replace("c.tma(A, B)", "c.tma(B, A)"))
    assert r.returncode == 0 and "c.tma(A,B)" in r.stdout, r.stdout + r.stderr


def matmul_ptx_for_hopper(tmp_path, schedule, warps, warp_specialize=False):
    """The PTX of MATMUL under `schedule`, compiled for sm_90 in bfloat16 at 3 stages."""
    src, out = tmp_path / "c.dt", tmp_path / "c.py"
    src.write_text(MATMUL)
    r = run_dtc(src, "-o", out, "--schedule", schedule + f"; c.num_warps({warps}); c.compile()")
    assert r.returncode == 0, r.stderr
    return compile_for_hopper(out, "c_kernel", "bf16", num_warps=warps, num_stages=3,
                              warp_specialize=warp_specialize)["ptx"]


def test_descriptor_loads_compile_to_tma_copies_for_hopper(tmp_path):
    ptx = matmul_ptx_for_hopper(tmp_path, "c.block(m:128, n:128); c.tensorize(m:0, n:0, k:64); "
                                "c.tma(A, B); c.persistent(interleaved)", 8)
    assert "cp.async.bulk.tensor" in ptx and "wgmma.mma_async" in ptx
    assert "ld.local" not in ptx and "st.local" not in ptx


# ---- the Func's own store through a descriptor: tma(A, B, c) ---------------------------------

STORE_SCHEDULE = SCHEDULE.replace("c.tma(A, B)", "c.tma(A, B, c)")


@pytest.fixture
def descriptor_stores(monkeypatch):
    """How many descriptor stores the interpreter runs (one per tile stored)."""
    return _counted(monkeypatch, "create_descriptor_store")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_result_tiles_stored_through_a_descriptor(tmp_path, dtype, descriptor_stores):
    module, text = compile_source(tmp_path, MATMUL, STORE_SCHEDULE)
    assert "c_desc = tl.make_tensor_descriptor(c_ptr, [m_size, n_size], [c_stride0, 1], [32, 64])" \
        in text
    assert ("if c_TMA:\n" in text and "c_desc.store([tl.cast(m_start, tl.int32), "
            "tl.cast(n_start, tl.int32)], c.to(c_ptr.dtype.element_ty))" in text)
    # 70 rows and 72 columns end inside tiles: the descriptor writes nothing past the edges
    # (the output is a view into a larger, poisoned buffer whose other elements must survive).
    for m, n, k in [(70, 72, 48), (64, 128, 64)]:
        A, B = torch.randn(m, k).to(dtype), torch.randn(k, n).to(dtype)
        buffer = torch.full((m + 3, n + 8), 7.0, dtype=dtype)
        out = buffer[:m, :n]
        stores = len(descriptor_stores)
        got = module.c(A, B, out=out)
        assert got.data_ptr() == out.data_ptr()
        assert len(descriptor_stores) - stores == -(-m // 32) * -(-n // 64)
        torch.testing.assert_close(got.double(), (A.double() @ B.double()).to(dtype).double(),
                                   rtol=2e-2, atol=2e-2)
        assert (buffer[m:] == 7).all() and (buffer[:, n:] == 7).all()


def test_an_output_that_does_not_qualify_is_stored_through_pointers(tmp_path, descriptor_stores):
    module, _ = compile_source(tmp_path, MATMUL, STORE_SCHEDULE)
    A, B = torch.randn(33, 16).half(), torch.randn(16, 7).half()  # rows of 14 bytes
    got = module.c(A, B)
    torch.testing.assert_close(got.double(), (A.double() @ B.double()).half().double(),
                               rtol=2e-2, atol=2e-2)
    B = torch.randn(16, 40).half()
    transposed = torch.empty(40, 33, dtype=torch.float16).t()  # last stride 33
    got = module.c(A, B, out=transposed)
    torch.testing.assert_close(got.double(), (A.double() @ B.double()).half().double(),
                               rtol=2e-2, atol=2e-2)
    assert not descriptor_stores


@pytest.mark.parametrize("persistent", ["none", "interleaved"])
def test_the_gemm_epilogue_stored_through_a_descriptor(tmp_path, persistent, descriptor_stores):
    from conftest import ROOT
    source = (ROOT / "templates" / "gemm_epilogue.dt").read_text()
    module, _ = compile_source(tmp_path, source, "out.block(m:64, n:32); "
                               "out.tensorize(m:0, n:0, k:16); mm.fuse_at(out, n); "
                               f"out.tma(A, W, out); out.persistent({persistent}); out.compile()")
    A, W, bias = torch.randn(90, 64).half(), torch.randn(64, 72).half(), torch.randn(72).half()
    got = module.out(A, W, bias)
    want = torch.nn.functional.gelu(A.double() @ W.double() + bias.double())
    torch.testing.assert_close(got.double(), want.half().double(), rtol=2e-2, atol=2e-2)
    assert len(descriptor_stores) == 2 * 3


SCALE = """Func c;
In A;
Var m, n;
c[m, n] = A[m, n] * 2;
c.compile();
"""


def test_an_element_wise_func_stores_through_a_descriptor(tmp_path, descriptor_stores):
    module, _ = compile_source(tmp_path, SCALE, "c.block(m:16, n:32); c.tensorize(m:0, n:0); "
                               "c.tma(c); c.compile()")
    A = torch.randn(40, 72)
    torch.testing.assert_close(module.c(A), A * 2)
    assert len(descriptor_stores) == 3 * 3


def test_a_whole_dimension_tile_is_stored_through_a_descriptor_where_its_box_allows(
        tmp_path, descriptor_stores):
    """A tile as wide as a whole dimension (`n:0`, its width a parameter) stores through the
    descriptor where the call's width makes a box of 16 to 256 (the wrapper checks it per call),
    through pointers where it does not: 72 columns in tiles of 128, 300 in tiles of 512."""
    module, text = compile_source(tmp_path, SCALE, "c.block(m:16); c.tensorize(m:0, n:0); "
                                  "c.tma(c); c.compile()")
    assert "[16, n_TILE]) if c_TMA else None" in text
    for n, stored in [(72, 3), (300, 0)]:
        A = torch.randn(40, n)
        before = len(descriptor_stores)
        torch.testing.assert_close(module.c(A), A * 2)
        assert len(descriptor_stores) - before == stored, n


@pytest.mark.parametrize("causal", [False, True], ids=["plain", "causal"])
def test_an_output_of_four_dimensions_is_stored_through_a_descriptor(tmp_path, causal,
                                                                     descriptor_stores):
    """FlashAttention's out[b, h, m, n] with `tma(Q, K, V, out)`: each program's [1, 1, rows, n]
    block through a descriptor (b and h stored an index at a time, the reductions' axes of one
    element dropped), into a given strided output whose other elements survive; checked against
    attention in float64. Compiled for sm_90 the store is a 4-D bulk tensor store."""
    from conftest import ROOT
    name = "flash_attention_causal" if causal else "flash_attention"
    source = (ROOT / "templates" / f"{name}.dt").read_text()
    module, text = compile_source(
        tmp_path, source, "p.fuse_at(out, m); e.fuse_at(out, m); s.fuse_at(out, m); "
        "qk.fuse_at(out, m); mx.fuse_at(out, m); out.block(b:1, h:1, m:64); "
        "out.tensorize(m:0, n:0, k:0, l:32); out.map(b, h, m); out.online(l); "
        "out.tma(Q, K, V, out); out.compile()")
    assert ("out__desc = tl.make_tensor_descriptor(out__ptr, [b_size, h_size, m_size, n_size], "
            "[out__stride0, out__stride1, out__stride2, 1], [1, 1, 64, n_TILE]) if out__TMA "
            "else None") in text
    assert "[1, 1, 64, n_TILE]))" in text
    torch.manual_seed(3)
    b, h, s, d = 2, 2, 100, 16
    Q, K, V = (torch.randn(b, h, s, d).bfloat16() for _ in range(3))
    buffer = torch.full((b, h, s, 2 * d), 7.0, dtype=torch.bfloat16)
    out = buffer[..., :d]
    got = module.out(Q, K, V, out=out)
    assert got.data_ptr() == out.data_ptr()
    assert len(descriptor_stores) == b * h * 2
    scores = Q.double() @ K.double().transpose(-1, -2) / d ** 0.5
    if causal:
        scores = scores.masked_fill(torch.ones(s, s, dtype=torch.bool).triu(1), float("-inf"))
    want = torch.softmax(scores, -1) @ V.double()
    torch.testing.assert_close(got.double(), want, rtol=2e-2, atol=2e-2)
    assert (buffer[..., d:] == 7).all()
    ptx = compile_for_hopper(tmp_path / "prog.py", "out__kernel", "bf16", tiles=64,
                             num_warps=4)["ptx"]
    assert "cp.async.bulk.tensor.4d.global.shared" in ptx


def test_a_store_no_descriptor_can_make_is_refused_with_the_reason(tmp_path):
    for source, schedule, reason in [
            (MATMUL, "c.block(m:32, n:64); c.tensorize(m:0, n:0, k:16); c.tma(A, B, c); "
             "c.block(k:32); c.atomic(k)", "`k` is blocked"),
            (SCALE, "c.block(m:32, n:8); c.tensorize(m:0, n:0); c.tma(c)",
             "cannot store its tiles through a tensor descriptor: the tile of `n` is 8 wide, "
             "where a descriptor's block is 16 to 256; drop `c` from `tma`"),
            (SCALE, "c.block(m:32); c.tensorize(m:0); c.tma(c)",
             "its values are not [m, n] tiles (tensor axes m:32)")]:
        src = tmp_path / "c.dt"
        src.write_text(source)
        r = run_dtc(src, "--check", "--schedule", schedule + "; c.compile()")
        assert r.returncode != 0 and reason in r.stderr, schedule + "\n" + r.stderr


def test_canonical_text_names_the_func_last(tmp_path):
    src = tmp_path / "c.dt"
    src.write_text(MATMUL)
    r = run_dtc(src, "--canonical", "--schedule", STORE_SCHEDULE.replace("c.tma(A, B, c)",
                                                                          "c.tma(c, B, A)"))
    assert r.returncode == 0 and "c.tma(A,B,c)" in r.stdout, r.stdout + r.stderr


def test_descriptor_stores_compile_to_tma_stores_for_hopper(tmp_path):
    ptx = matmul_ptx_for_hopper(tmp_path, "c.block(m:128, n:128); c.tensorize(m:0, n:0, k:64); "
                                "c.tma(A, B, c); c.persistent(interleaved); "
                                "c.warp_specialize(k)", 4, warp_specialize=True)
    # The result tile leaves shared memory by a bulk tensor store; the loop is specialized.
    assert "cp.async.bulk.tensor.2d.global.shared" in ptx and "setmaxnreg" in ptx
    assert "ld.local" not in ptx and "st.local" not in ptx


# ---- subtile(n:P): the result tile stored in parts ---------------------------------------------

@pytest.mark.parametrize("parts", [2, 4])
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_the_tile_stored_in_parts(tmp_path, parts, dtype, descriptor_stores):
    module, text = compile_source(
        tmp_path, MATMUL, "c.block(m:32, n:64); c.tensorize(m:0, n:0, k:16); "
        f"c.tma(A, B, c); c.subtile(n:{parts}); c.compile()")
    width = 64 // parts
    assert f"[c_stride0, 1], [32, {width}])" in text
    assert text.count("c_desc.store([") == parts
    # Partial tiles at both edges, the parts past the last column included.
    for m, n, k in [(70, 72, 48), (32, 64, 16), (5, 8, 16)]:
        A, B = torch.randn(m, k).to(dtype), torch.randn(k, n).to(dtype)
        buffer = torch.full((m + 2, n + 8), 7.0, dtype=dtype)
        stores = len(descriptor_stores)
        got = module.c(A, B, out=buffer[:m, :n])
        assert len(descriptor_stores) - stores == -(-m // 32) * -(-n // 64) * parts
        torch.testing.assert_close(got.double(), (A.double() @ B.double()).to(dtype).double(),
                                   rtol=2e-2, atol=2e-2)
        assert (buffer[m:] == 7).all() and (buffer[:, n:] == 7).all()


def test_the_epilogue_stored_in_halves_and_its_fallback(tmp_path, descriptor_stores):
    from conftest import ROOT
    source = (ROOT / "templates" / "gemm_epilogue.dt").read_text()
    module, _ = compile_source(tmp_path, source, "out.block(m:64, n:32); "
                               "out.tensorize(m:0, n:0, k:16); mm.fuse_at(out, n); "
                               "out.tma(A, W, out); out.subtile(n:2); "
                               "out.persistent(interleaved); out.compile()")
    A, W, bias = torch.randn(90, 64).half(), torch.randn(64, 72).half(), torch.randn(72).half()
    want = torch.nn.functional.gelu(A.double() @ W.double() + bias.double()).half().double()
    torch.testing.assert_close(module.out(A, W, bias).double(), want, rtol=2e-2, atol=2e-2)
    assert len(descriptor_stores) == 2 * 3 * 2
    # An output with a last stride other than 1: the whole tile through pointers.
    out = torch.empty(72, 90, dtype=torch.float16).t()
    torch.testing.assert_close(module.out(A, W, bias, out=out).double(), want, rtol=2e-2,
                               atol=2e-2)
    assert len(descriptor_stores) == 2 * 3 * 2


def test_subtile_canonical_text(tmp_path):
    src = tmp_path / "c.dt"
    src.write_text(MATMUL)
    r = run_dtc(src, "--canonical", "--schedule", "c.subtile(n:2); c.block(m:32, n:64); "
                "c.tensorize(m:0, n:0, k:16); c.tma(c, A, B); c.compile()")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == ("c.block(m:32,n:64);c.tensorize(m:0,n:0,k:16);c.tma(A,B,c);"
                                "c.subtile(n:2)")


def test_parts_compile_to_tma_stores_for_hopper(tmp_path):
    src, out = tmp_path / "c.dt", tmp_path / "c.py"
    src.write_text(MATMUL)
    shared = {}
    for parts in ("", "c.subtile(n:2); "):
        r = run_dtc(src, "-o", out, "--schedule", "c.block(m:128, n:256); "
                    "c.tensorize(m:0, n:0, k:64); c.tma(A, B, c); " + parts +
                    "c.persistent(interleaved); c.num_warps(8); c.compile()")
        assert r.returncode == 0, r.stderr
        compiled = compile_for_hopper(out, "c_kernel", "bf16", num_warps=8, num_stages=3)
        stores = compiled["ptx"].count("cp.async.bulk.tensor.2d.global.shared")
        assert stores == (2 if parts else 1), (parts, stores)
        shared[parts] = compiled["shared"]
    # The store's buffer is a half's (128 x 128 bf16, 32 KiB), not the tile's 64 KiB.
    assert shared[""] - shared["c.subtile(n:2); "] >= 128 * 128 * 2, shared
    # Triton 3.6 fails to warp-specialize a split tile: refused.
    r = run_dtc(src, "--check", "--schedule", "c.block(m:128, n:128); c.tensorize(m:0, n:0, "
                "k:64); c.tma(A, B, c); c.subtile(n:2); c.num_warps(4); c.warp_specialize(k); "
                "c.compile()")
    assert r.returncode == 1 and "does not warp-specialize a loop whose result" in r.stderr


def test_a_tile_past_its_blocks_end_is_not_stored_through_a_descriptor(tmp_path):
    # A block of 24 rows holds a 32-row tile: the pointer store masks rows 24-31, a descriptor
    # would write them into the next block's rows (zeros, under persistent programs that run the
    # blocks out of order). Refused with the reason; a block that is a multiple of its tiles runs.
    src = tmp_path / "c.dt"
    src.write_text(SCALE)
    r = run_dtc(src, "--check", "--schedule", "c.block(m:24, n:32); c.tensorize(m:0, n:0); "
                "c.persistent(interleaved); c.tma(c); c.compile()")
    assert r.returncode == 1 and "the block of `m` (24) is not a multiple of its tile (32)" \
        in r.stderr, r.stderr
    module, _ = compile_source(tmp_path, MATMUL, "c.block(m:48, n:32); "
                               "c.tensorize(m:16, n:0, k:16); c.persistent(interleaved); "
                               "c.tma(B, c); c.compile()")
    A, B = torch.randn(192, 16), torch.randn(16, 32)
    torch.testing.assert_close(module.c(A, B), A @ B, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("declaration, call", [
    ("In A; SIn c_TMA;", lambda m, A: m.c(A, 3.0)),
    ("In A, c_TMA;", lambda m, A: m.c(A, torch.full_like(A, 3.0))),
    ("In A; SIn A_TMA, c_HALF;", lambda m, A: m.c(A, 3.0, 1.0))])
def test_flags_never_take_a_users_name(tmp_path, declaration, call):
    value = {"In A; SIn c_TMA;": "A[m, n] * c_TMA", "In A, c_TMA;": "A[m, n] * c_TMA[m, n]",
             "In A; SIn A_TMA, c_HALF;": "A[m, n] * A_TMA * c_HALF"}[declaration]
    source = f"Func c;\n{declaration}\nVar m, n;\nc[m, n] = {value};\nc.compile();\n"
    module, _ = compile_source(tmp_path, source, "c.block(m:16, n:32); c.tensorize(m:0, n:0); "
                               "c.tma(c); c.compile()")
    A = torch.randn(40, 64)
    torch.testing.assert_close(call(module, A), A * 3.0)


# ---- descriptors of 3 to 5 dimensions, whole-dimension tiles, the online loop ----------------

BATCHED = """Func c;
In A, B;
Var b, m, n;
RVar k;
c[b, m, n] = rdot(A[b, m, k], B[b, k, n], k);
c.compile();
"""


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_batched_operands_through_descriptors_of_their_rank(tmp_path, dtype, descriptors_made):
    module, text = compile_source(tmp_path, BATCHED, "c.block(b:1, m:32, n:32); "
                                  "c.tensorize(m:0, n:0, k:16); c.tma(A, B); c.compile()")
    assert ("tl.make_tensor_descriptor(A_ptr, [b_size, m_size, k_size], [A_stride0, A_stride1, 1], "
            "[1, 32, 16])") in text
    assert "tl.reshape(A_desc.load([" in text
    A, B = torch.randn(3, 40, 48).to(dtype), torch.randn(3, 48, 72).to(dtype)
    got = module.c(A, B)
    assert descriptors_made
    torch.testing.assert_close(got.double(), (A.double() @ B.double()).to(dtype).double(),
                               rtol=2e-2, atol=2e-2)


def test_a_whole_dimension_tile_is_a_descriptor_block_up_to_256(tmp_path, descriptors_made):
    module, text = compile_source(tmp_path, MATMUL, "c.block(m:32, n:32); "
                                  "c.tensorize(m:0, n:0, k:0); c.tma(A, B); c.compile()")
    assert "[32, k_TILE]) if A_TMA" in text and "_dt_tma(A) and _dt_tile(k, 16) <= 256" in text
    for k, through_descriptors in [(40, True), (256, True), (264, False)]:
        A, B = torch.randn(33, k).half(), torch.randn(k, 40).half()
        made = len(descriptors_made)
        torch.testing.assert_close(module.c(A, B).double(),
                                   (A.double() @ B.double()).half().double(), rtol=2e-2,
                                   atol=2e-2)
        assert (len(descriptors_made) > made) == through_descriptors, k


@pytest.mark.parametrize("causal", [False, True])
def test_the_online_loop_loads_through_descriptors(tmp_path, causal, descriptors_made):
    from conftest import ROOT
    name = "flash_attention_causal" if causal else "flash_attention"
    source = (ROOT / "templates" / f"{name}.dt").read_text()
    module, text = compile_source(tmp_path, source, "p.fuse_at(out, m); e.fuse_at(out, m); "
                                  "s.fuse_at(out, m); qk.fuse_at(out, m); mx.fuse_at(out, m); "
                                  "out.block(b:1, h:1, m:32); "
                                  "out.tensorize(m:0, n:0, k:0, l:32); out.online(l); "
                                  "out.tma(Q, K, V); out.compile()")
    # Each loop over the keys (two under the mask) loads K and V through their descriptors.
    assert text.count("K_desc.load([") == (2 if causal else 1)
    assert text.count("V_desc.load([") == (2 if causal else 1)
    torch.manual_seed(1)
    Q, K, V = (torch.randn(2, 2, s, 32).half() for s in (40, 72, 72))
    s = Q.double() @ K.double().transpose(-1, -2) / 32 ** 0.5
    if causal:
        s = s.masked_fill(torch.ones(40, 72, dtype=torch.bool).triu(1), float("-inf"))
    want = torch.softmax(s, -1) @ V.double()
    torch.testing.assert_close(module.out(Q, K, V).double(), want, rtol=2e-2, atol=2e-2)
    assert descriptors_made


def test_the_online_loop_compiles_to_tma_copies_for_hopper(tmp_path):
    from conftest import ROOT
    out = tmp_path / "fa.py"
    r = run_dtc(ROOT / "templates" / "flash_attention_causal.dt", "-o", out, "--schedule",
                "p.fuse_at(out, m); e.fuse_at(out, m); s.fuse_at(out, m); qk.fuse_at(out, m); "
                "mx.fuse_at(out, m); out.block(b:1, h:1, m:128); "
                "out.tensorize(m:0, n:0, k:0, l:64); out.online(l); out.tma(Q, K, V); "
                "out.num_warps(8); out.compile()")
    assert r.returncode == 0, r.stderr
    compiled = compile_for_hopper(out, "out__kernel", "bf16", {"k_TILE": 128, "n_TILE": 128},
                                  num_warps=8, num_stages=2)
    ptx = compiled["ptx"]
    # Q once, K and V in each of the two loops.
    assert ptx.count("cp.async.bulk.tensor.4d") >= 5 and "wgmma.mma_async" in ptx, \
        ptx.count("cp.async.bulk.tensor")
    assert "ld.local" not in ptx and "st.local" not in ptx


def test_a_zero_stride_is_no_descriptors(tmp_path, descriptor_stores, descriptors_made):
    # One row whose stride is 0 (as_strided, or a broadcast): no tensor map takes it.
    module, _ = compile_source(tmp_path, MATMUL, STORE_SCHEDULE)
    A, B = torch.randn(1, 48).half(), torch.randn(48, 64).half()
    out = torch.empty(64, dtype=torch.float16).as_strided((1, 64), (0, 1))
    got = module.c(A, B, out=out)
    torch.testing.assert_close(got.double(), (A.double() @ B.double()).half().double(),
                               rtol=2e-2, atol=2e-2)
    assert not descriptor_stores
