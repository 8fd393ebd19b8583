"""warp_specialize(l) of an online loop (docs/language.md, Warp specialization): FlashAttention's
loop over the keys, which on Hopper runs as the Gluon kernel dtc prints for it
(kir/OnlinePartitions.h: a TMA producer warp, a consumer warpgroup per 64 query rows). Its
printed form and its compilation for sm_90 are checked here; under the interpreter the wrapper
runs the Triton kernel, checked against attention written in float64. On an H200 the Gluon
kernel was checked against SDPA at every shape of tests/gpu/online_ws_ab.py."""
import re

import pytest
import torch

from conftest import ROOT, compile_source, run_dtc
from hopper import compile_for_hopper
from test_online import ATTENTION

FLASH = (ROOT / "templates" / "flash_attention.dt").read_text()
CAUSAL = (ROOT / "templates" / "flash_attention_causal.dt").read_text()
FUSED = ("p.fuse_at(out, m); e.fuse_at(out, m); s.fuse_at(out, m); qk.fuse_at(out, m); "
         "mx.fuse_at(out, m); out.map(b, h, m); out.online(l); out.tma(Q, K, V); ")


def schedule(rows, keys, warps, stages, ws=True):
    return (FUSED + f"out.block(b:1, h:1, m:{rows}); out.tensorize(m:0, n:0, k:0, l:{keys}); "
            f"{'out.warp_specialize(l); ' if ws else ''}out.num_warps({warps}); "
            f"out.num_stages({stages})")


def attention(Q, K, V, causal=False):
    s = Q.double() @ K.double().transpose(-1, -2) / Q.shape[-1] ** 0.5
    if causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(s, -1) @ V.double()


def kernel_of(text, name):
    start = text.index(f"def {name}(")
    return text[start:text.index("\n\n\n", start)]


def test_the_gluon_form_is_printed_and_launched(tmp_path):
    """Two consumers of 64 rows each for a block of 128 at 8 warps, and the producer; the
    wrapper launches `out__kernel_hopper`, which starts the Gluon kernel with 4 warps (its
    partitions add the rest) and runs the Triton kernel under the interpreter."""
    module, text = compile_source(tmp_path, FLASH, schedule(128, 64, 8, 2))
    assert re.search(r"for l_iter in tl\.range\(0, l_size, 64, warp_specialize=K_HALF & K_TMA & "
                     r"Q_HALF & Q_TMA & V_HALF & V_TMA & WARP_SPECIALIZE\):", text), text
    assert re.search(r"plan\.launch\(\d, out__kernel_hopper, \(", text), text
    assert re.search(r"out__kernel_hopper = _DtHopper\(out__kernel, out__kernel_gluon, "
                     r"\((\d+, ){5}\d+\), 168, 4\)", text), text
    load = kernel_of(text, "out__kernel_load").split('"""')[2]
    online = kernel_of(text, "out__kernel_online").split('"""')[2]
    gluon = kernel_of(text, "out__kernel_gluon").split('"""')[2]
    # The producer: the descriptors, the query tile once, then keys and values; no softmax.
    assert "tma.async_copy_global_to_shared(Q_desc, [" in load
    assert load.count("tma.async_copy_global_to_shared(") == 3
    assert "exp2" not in load and "warpgroup_mma" not in load
    # A consumer: its 64 rows, the scores on the warpgroup instructions, the running maximum of
    # the products before their scale, the accumulator rescaled in its own layout.
    assert "make_tensor_descriptor" not in online and "async_copy" not in online
    assert "_dt_q_tile = _dt_q.reshape([128, k_TILE]).slice(_dt_which * 64, 64)" in online
    assert ("k_dot = warpgroup_mma(_dt_q_tile, _dt_k_ring.index(_dt_slot).reshape([64, k_TILE])"
            ".permute((1, 0)),") in online
    assert "out__kernel_rowmax(gl.where(l_mask[None, :], k_dot, float(\"-inf\")))" in online
    assert "gl.convert_layout(l_alpha, gl.SliceLayout(1, _dt_O)))[:, None]" in online
    # A step's keys released once its scores are in, its values once its update is.
    assert ("k_dot = warpgroup_mma_wait(num_outstanding=1, deps=(k_dot,))\n"
            "            mbarrier.arrive(_dt_k_empty.index(_dt_slot), count=1)\n") in online
    assert ("l_acc, _dt_p = warpgroup_mma_wait(num_outstanding=0, deps=(l_acc, _dt_p))\n"
            "            mbarrier.arrive(_dt_v_empty.index(_dt_prev), count=1)\n") in online
    assert "gl.store(out__ptr + " in online
    # The kernel: two consumers and the producer; every buffer released by both.
    assert gluon.count("(out__kernel_online, (") == 2 and "(out__kernel_load, (" in gluon
    assert "mbarrier.init(_dt_k_empty.index(_dt_i), count=2)" in gluon
    assert "mbarrier.init(_dt_v_empty.index(_dt_i), count=2)" in gluon
    for ring in ("k", "v"):  # the producer takes each buffer once both consumers released it
        assert (f"mbarrier.wait(_dt_{ring}_empty.index(_dt_slot), (_dt_at // 2 & 1) ^ 1)\n"
                f"        mbarrier.expect(_dt_{ring}_ready.index(_dt_slot), ") in load
    assert "], [4, 1], [240, 24])" in gluon
    # Under the interpreter: the Triton kernel, partial blocks of rows and keys.
    Q, K, V = (torch.randn(1, 2, n, 16).bfloat16() for n in (130, 100, 100))
    assert module.out__kernel_hopper.chosen((Q,) + (True,) * 60) is module.out__kernel
    torch.testing.assert_close(module.out(Q, K, V).double(), attention(Q, K, V),
                               rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("rows,keys,warps,stages", [(64, 32, 4, 2), (128, 64, 8, 3)])
def test_results_under_the_interpreter(tmp_path, dtype, rows, keys, warps, stages):
    """The Triton kernel, as every GPU but Hopper and the interpreter run it: tensors that
    qualify for descriptors and a strided view that does not, float32 included."""
    module, _ = compile_source(tmp_path, FLASH, schedule(rows, keys, warps, stages))
    torch.manual_seed(3)
    Q, K, V = (torch.randn(2, 1, n, 16).to(dtype) for n in (70, 90, 90))
    Kt = torch.randn(2, 90, 1, 16).to(dtype).transpose(1, 2)  # a [b, s, h, d] tensor's view
    for k in (K, Kt):
        torch.testing.assert_close(module.out(Q, k, V).double(), attention(Q, k, V),
                                   rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("rows,keys,warps,stages,d", [
    (128, 64, 8, 2, 128), (128, 128, 8, 3, 128), (128, 128, 8, 2, 64), (64, 64, 4, 3, 64)])
def test_the_gluon_kernel_compiles_for_hopper(tmp_path, rows, keys, warps, stages, d):
    """Compiled for sm_90 as the wrapper launches it there (4 warps and the partitions' own):
    registers set per partition, TMA copies, warpgroup products, no spills, and the shared
    memory of the query tile and the ring of key and value tiles."""
    src = tmp_path / "f.dt"
    src.write_text(FLASH)
    out = tmp_path / "f.py"
    r = run_dtc(src, "-o", out, "--schedule", schedule(rows, keys, warps, stages))
    assert r.returncode == 0, r.stderr
    compiled = compile_for_hopper(out, "out__kernel_gluon", "bf16", tiles=d, num_warps=4)
    ptx = compiled["ptx"]
    assert "setmaxnreg" in ptx and "wgmma.mma_async" in ptx and "cp.async.bulk.tensor" in ptx
    assert "ld.local" not in ptx and "st.local" not in ptx
    buffers = (rows * d + stages * keys * 2 * d) * 2
    assert buffers <= compiled["shared"] <= buffers + 1024, compiled["shared"]


def test_the_causal_loops_share_the_ring(tmp_path):
    """Under the causal mask the online loop runs in two parts (the key tiles before the block's
    first query, then the diagonal under the mask): the producer and each consumer walk both,
    one count of tiles taken (`_dt_at`) naming the ring's slot and phase across them. Compiled
    for sm_90; under the interpreter the Triton kernel, against causal attention in float64."""
    module, text = compile_source(tmp_path, CAUSAL, schedule(128, 64, 8, 2))
    load = kernel_of(text, "out__kernel_load").split('"""')[2]
    online = kernel_of(text, "out__kernel_online").split('"""')[2]
    assert "for l_iter in range(0, l_diagonal, 64):" in load
    assert "for r2_l_iter in range(l_diagonal, l_stop, 64):" in load
    assert load.count("_dt_at += 1") == 2 and load.count("_dt_at = 0") == 1
    # Each consumer's loops pipelined: a first step, then the loop over the rest.
    assert "if 0 < l_diagonal:" in online and "if l_diagonal < l_stop:" in online
    assert "for l_iter in range(0 + 64, l_diagonal, 64):" in online
    assert "for r2_l_iter in range(l_diagonal + 64, l_stop, 64):" in online
    assert online.count("_dt_at += 1") == 4 and online.count("_dt_at = 0") == 1
    assert load.count("tma.async_copy_global_to_shared(") == 5
    assert online.count("warpgroup_mma_wait(") == 8
    assert "(r2_l_idx[None, :]) <= (m_idx[:, None])" in online
    compiled = compile_for_hopper(tmp_path / "prog.py", "out__kernel_gluon", "bf16", tiles=128,
                                  num_warps=4)
    assert "wgmma.mma_async" in compiled["ptx"] and "ld.local" not in compiled["ptx"]
    torch.manual_seed(5)
    for m in (130, 256):
        Q, K, V = (torch.randn(1, 2, m, 16).bfloat16() for _ in range(3))
        torch.testing.assert_close(module.out(Q, K, V).double(), attention(Q, K, V, causal=True),
                                   rtol=2e-2, atol=2e-2)


def test_rows_a_warpgroup_cannot_split_warn_and_keep_the_plain_loop(tmp_path):
    src = tmp_path / "f.dt"
    src.write_text(FLASH)
    out = tmp_path / "f.py"
    r = run_dtc(src, "-o", out, "--schedule", schedule(64, 64, 8, 2))
    assert r.returncode == 0, r.stderr
    assert ("warning: in `out.warp_specialize(l)`: on Hopper the online loop runs in a producer "
            "and consumer partitions, and here each of the 2 consumer warpgroups takes a share "
            "of the block's rows that is not a multiple of 64") in r.stderr, r.stderr
    assert "there its loop is a plain one, as without `warp_specialize`" in r.stderr
    assert "_gluon" not in out.read_text()


@pytest.mark.parametrize("precision", ["tf32x3", "ieee"])
def test_an_update_in_float32_warns_and_keeps_the_plain_loop(tmp_path, precision):
    """precision(tf32x3) or (ieee) keeps the probabilities in float32 for the product with the
    values (tl.dot's own algorithm), which the warpgroup instructions cannot take from registers:
    no Gluon kernel (it did not compile for sm_90: `in-register LHS operand must have a kWidth
    of 1`) and a warning."""
    src = tmp_path / "f.dt"
    src.write_text(FLASH)
    out = tmp_path / "f.py"
    r = run_dtc(src, "-o", out, "--schedule",
                schedule(128, 64, 8, 2) + f"; out.precision({precision})")
    assert r.returncode == 0, r.stderr
    assert ("here the probabilities are multiplied by the values in float32 (the product's "
            "precision), and the warpgroup instructions take them from registers only in 16 "
            "bits; there its loop is a plain one, as without `warp_specialize`") in r.stderr
    assert "_gluon" not in out.read_text()


def test_the_label_specialized_is_the_online_one(tmp_path):
    src = tmp_path / "f.dt"
    src.write_text(FLASH)
    r = run_dtc(src, "--check", "--schedule",
                schedule(128, 64, 8, 2).replace("warp_specialize(l)", "warp_specialize(k)"))
    assert r.returncode == 1
    assert ("the online loop runs over `l`, so it is the loop to specialize; use "
            "`out.warp_specialize(l)`") in r.stderr, r.stderr


# Attention over [m, k] and [l, k] matrices (no batch or head), with its log-sum-exp.
MATRICES = ATTENTION.replace("Func out,", "Func out, lse,").replace(
    "out[m, n] =", "lse[m] = mx[m] + log(s[m]);\nout[m, n] =")
MATRICES_FUSED = ("p.fuse_at(out, m); e.fuse_at(out, m); s.fuse_at(out, m); qk.fuse_at(out, m); "
                  "mx.fuse_at(out, m); out.online(l); out.tma(Q, K, V); out.warp_specialize(l); ")


@pytest.mark.parametrize("lse", [False, True])
def test_an_output_block_as_wide_as_the_key_step_and_a_row_vector_stored_beside(tmp_path, lse):
    """Blocks of the output's columns as wide as the key step (the two products' layouts are
    then one), and a log-sum-exp stored beside the output (a row vector: a store of its own
    form). Compiled for sm_90; under the interpreter against float64."""
    src = MATRICES if lse else ATTENTION
    sched = MATRICES_FUSED + ("lse.store_in(out); " if lse else "") + \
        "out.block(m:64, n:64); out.tensorize(m:0, n:0, k:0, l:64); out.num_warps(4); " \
        "out.num_stages(2)"
    module, text = compile_source(tmp_path, src, sched)
    online = kernel_of(text, "out__kernel_online")
    assert online.count("gl.store(") == (2 if lse else 1)
    compiled = compile_for_hopper(tmp_path / "prog.py", "out__kernel_gluon", "bf16",
                                  tiles=64, num_warps=4)
    assert "wgmma.mma_async" in compiled["ptx"] and "ld.local" not in compiled["ptx"]
    torch.manual_seed(9)
    Q, K, V = torch.randn(100, 64).bfloat16(), torch.randn(90, 64).bfloat16(), \
        torch.randn(90, 130).bfloat16()
    got = module.out(Q, K, V)
    want = attention(Q, K, V)
    if lse:
        got, got_lse = got
        s = Q.double() @ K.double().t() / 8
        torch.testing.assert_close(got_lse.double(), torch.logsumexp(s, -1),
                                   rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(got.double(), want, rtol=2e-2, atol=2e-2)


def test_an_online_loop_inside_another_warns_and_keeps_the_plain_loop(tmp_path):
    src = tmp_path / "f.dt"
    src.write_text(FLASH)
    out = tmp_path / "f.py"
    r = run_dtc(src, "-o", out, "--schedule",
                schedule(128, 64, 8, 2).replace("n:0", "n:32"))
    assert r.returncode == 0, r.stderr
    assert ("on Hopper the online loop runs in a producer and consumer partitions, and here the "
            "online loop runs inside another loop") in r.stderr, r.stderr
    assert "_gluon" not in out.read_text()


@pytest.mark.parametrize("source,order", [(FLASH, "interleaved"), (CAUSAL, "blocked")])
def test_persistent_programs_walk_the_blocks_in_both_partitions(tmp_path, source, order):
    """persistent(...): the producer and the consumers loop over the same blocks. The
    descriptors are made once per program; the queries of block i go to buffer i % count (two
    where they fit beside the ring, `_dt_q_count`), taken again once both consumers have run
    their loops on block i - count (`_dt_q_empty`), their phase i // count; the ring's count
    runs on across blocks. Each consumer names its rows of the block's buffer at the top of each
    loop (not once before them: Triton 3.6 then read a stale buffer in the second loop, the
    causal diagonal). Compiled for sm_90 (two buffers of 128×128 beside a ring of 2: 192 KiB);
    under the interpreter (3 programs for 8 blocks) the Triton kernel, against float64."""
    causal = source is CAUSAL
    module, text = compile_source(tmp_path, source,
                                  schedule(128, 64, 8, 2) + f"; out.persistent({order})")
    load = kernel_of(text, "out__kernel_load").split('"""')[2]
    online = kernel_of(text, "out__kernel_online").split('"""')[2]
    gluon = kernel_of(text, "out__kernel_gluon").split('"""')[2]
    blocks = re.compile(r"\n    for pid in range\(.*\):\n")
    for part in (load, online):
        at = blocks.search(part)
        head, block = part[:at.start()], part[at.end():]
        assert "_dt_at = 0" in head and "_dt_done = 0" in head
        assert "_dt_at = 0" not in block and block.count("_dt_done += 1") == 1
        # A loop a part: the producer's one count a step, the consumer's pipelined (its first
        # step, then the rest).
        assert block.count("_dt_at += 1") == (2 if causal else 1) * (1 if part is load else 2)
    head = load[:blocks.search(load).start()]
    assert head.count("tma.make_tensor_descriptor(") == 3
    assert load.count("tma.make_tensor_descriptor(") == 3
    for part in (load, online):
        assert "    _dt_q_count: gl.constexpr = _dt_q.shape[0]\n" in part
        assert "        _dt_q_slot = _dt_done % _dt_q_count\n" in part
    assert "        mbarrier.wait(_dt_q_empty.index(_dt_q_slot), (_dt_done // _dt_q_count & 1) ^ 1)" \
        "\n        mbarrier.expect(_dt_q_ready.index(_dt_q_slot), Q_desc.block_type.nbytes)\n" in load
    assert "        mbarrier.wait(_dt_q_ready.index(_dt_q_slot), _dt_done // _dt_q_count & 1)\n" \
        in online
    # The queries are released after the loops, before the block's output is computed.
    assert (online.index("mbarrier.arrive(_dt_q_empty.index(_dt_q_slot), count=1)")
            < online.index("gl.store("))
    assert "mbarrier.init(_dt_q_empty.index(_dt_i), count=2)" in gluon
    assert "_dt_q_count: gl.constexpr = 2 if (2 * (1 * 1 * 128 * k_TILE) * " in gluon
    # The rows named at the top of each loop's region, the first step's `if`.
    tile = "_dt_q_tile = _dt_q.index(_dt_q_slot).reshape([128, k_TILE]).slice(_dt_which * 64, 64)"
    regions = re.findall(r"\n( +)if .*:  # the first step here.*\n( +)(.*)\n", online)
    assert len(regions) == (2 if causal else 1) and online.count(tile) == len(regions)
    assert all(inner == outer + "    " and line == tile for outer, inner, line in regions)
    compiled = compile_for_hopper(tmp_path / "prog.py", "out__kernel_gluon", "bf16", tiles=128,
                                  num_warps=4)
    ptx = compiled["ptx"]
    assert "wgmma.mma_async" in ptx and "cp.async.bulk.tensor" in ptx and "ld.local" not in ptx
    buffers = (2 * 128 * 128 + 2 * 2 * 64 * 128) * 2
    assert buffers <= compiled["shared"] <= buffers + 1024, compiled["shared"]
    torch.manual_seed(13)
    Q, K, V = (torch.randn(2, 2, 250, 16).bfloat16() for _ in range(3))
    torch.testing.assert_close(module.out(Q, K, V).double(), attention(Q, K, V, causal=causal),
                               rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("source", [FLASH, CAUSAL], ids=["plain", "causal"])
def test_the_scores_are_rounded_before_the_maximum_is_subtracted(tmp_path, source):
    """kir/RoundBeforeShift.h: the scaled scores are rounded on their own (`_dt_mul_rn`, PTX
    mul.rn) before the running maximum is subtracted, in the Triton kernel and the Gluon one.
    Fused into a multiply-add, the largest score minus the maximum was the product's rounding
    error, which for scaled scores beyond 2^31 overflowed exp2 on an H200: a NaN row where
    PyTorch's is finite (tests/gpu/online_special_values.py). Compiled for sm_90: the scores'
    exponentials read products and subtractions, not multiply-adds. Under the causal mask in
    both loops (the diagonal's scores are masked to -inf after the product)."""
    _, text = compile_source(tmp_path, source, schedule(128, 128, 8, 2))
    loops = 2 if source is CAUSAL else 1
    for kernel, copies in (("out__kernel", 1), ("out__kernel_online", 2)):  # pipelined: 2
        rounded = re.findall(r"cse_\d+ = _dt_mul_rn\(k_dot(?:_2)?, cse_\d+\)",
                             kernel_of(text, kernel))
        assert len(rounded) == loops * copies, kernel
    for kernel, warps in (("out__kernel", 8), ("out__kernel_gluon", 4)):
        ptx = compile_for_hopper(tmp_path / "prog.py", kernel, "bf16", tiles=128,
                                 num_warps=warps)["ptx"]
        exponentials = ptx.count("ex2.approx")
        # Every score's exponential but the rows' rescaling factors reads a rounded product.
        assert ptx.count("mul.rn.f32") >= exponentials * 0.9, kernel
        assert ptx.count("fma.rn.f32") <= exponentials // 8, kernel


@pytest.mark.parametrize("source", [FLASH, CAUSAL], ids=["plain", "causal"])
def test_each_update_is_pipelined_into_the_next_step(tmp_path, source):
    """Each step's update (P·V) is issued in the next step, with that step's scores, and runs
    while the consumer computes the step's exponentials: the first step's scores and statements
    before the loop, the last update after it, all under `if lo < hi`; the scores waited for
    with the update still running (num_outstanding=1) and their keys released; the update's
    values released once it is done. With 2 stages as with 3: the producer then loads a step's
    keys while the step before it is updated. Compiled for sm_90 (no spills)."""
    (tmp_path / "three").mkdir()
    (tmp_path / "two").mkdir()
    _, two = compile_source(tmp_path / "two", source, schedule(128, 128, 8, 2))
    _, text = compile_source(tmp_path / "three", source, schedule(128, 128, 8, 3))
    assert kernel_of(two, "out__kernel_online").replace("% 2", "% 3").replace("// 2", "// 3") \
        == kernel_of(text, "out__kernel_online")
    online = kernel_of(text, "out__kernel_online").split('"""')[2]
    loops = [("l_iter", "0", "l_size", "k_dot")] if source is FLASH else \
        [("l_iter", "0", "l_diagonal", "k_dot"), ("r2_l_iter", "l_diagonal", "l_stop", "k_dot_2")]
    for var, lo, hi, scores in loops:
        head = f"    if {lo} < {hi}:  # the first step here, each step's update in the next step\n"
        assert head in online
        part = online[online.index(head):]
        part = part[:part.index("mbarrier.arrive(_dt_v_empty.index(_dt_prev), count=1)\n",
                                part.index(f"for {var} in range("))]
        assert f"        {var} = {lo}\n" in part
        assert f"        for {var} in range({lo} + 128, {hi}, 128):\n" in part
        step = part[part.index(f"for {var} in range("):]
        # In the loop: this step's scores, then the previous step's update, then the wait for
        # the scores alone, the exponentials, and the update's wait and release.
        issue_s = step.index(f"{scores} = warpgroup_mma(_dt_q_tile, ")
        issue_u = step.index("_dt_p = gl.convert_layout(dot_operand")
        assert step.index("l_acc = warpgroup_mma(_dt_p, ") > issue_u
        wait_s = step.index(f"{scores} = warpgroup_mma_wait(num_outstanding=1, deps=({scores},))")
        exp = step.index("tl.exp2(cse_")
        wait_u = step.index("l_acc, _dt_p = warpgroup_mma_wait(num_outstanding=0, "
                            "deps=(l_acc, _dt_p))")
        release_k = step.index("mbarrier.arrive(_dt_k_empty.index(_dt_slot), count=1)")
        assert issue_s < issue_u < wait_s < release_k < exp < wait_u, step
        assert "_dt_v_ring.index(_dt_prev)" in step
        assert "mbarrier.wait(_dt_v_ready.index(_dt_prev), _dt_prev_phase)" in step
    ptx = compile_for_hopper(tmp_path / "three" / "prog.py", "out__kernel_gluon", "bf16",
                             tiles=128, num_warps=4)["ptx"]
    assert "wgmma.wait_group.sync.aligned 1;" in ptx and "ld.local" not in ptx


@pytest.mark.parametrize("stages,d,count", [(2, 128, 2), (3, 128, 1), (3, 64, 2), (4, 64, 2)])
def test_two_query_buffers_where_they_fit(tmp_path, stages, d, count):
    """Persistent programs keep two query buffers where both fit beside the ring in Hopper's
    shared memory (227 KiB, 4 KiB left for Triton's own): the producer loads the next block's
    queries, and its keys and values, while the consumers finish this one. One where they do
    not (3 stages of 128×128 keys and values at d = 128). Compiled for sm_90 at causal
    attention: the shared memory says how many buffers the kernel made."""
    compile_source(tmp_path, CAUSAL, schedule(128, 128, 8, stages) + "; out.persistent(interleaved)")
    compiled = compile_for_hopper(tmp_path / "prog.py", "out__kernel_gluon", "bf16", tiles=d,
                                  num_warps=4)
    buffers = (count * 128 * d + stages * 128 * 2 * d) * 2
    assert buffers <= compiled["shared"] <= buffers + 1024, (compiled["shared"], buffers)
    assert "ld.local" not in compiled["ptx"]


@pytest.mark.parametrize("rows,warps,persistent,d", [(128, 8, True, 128), (128, 8, False, 64),
                                                      (64, 4, True, 64)])
def test_the_output_leaves_through_the_query_buffer(tmp_path, rows, warps, persistent, d):
    """`tma(Q, K, V, out)`: each consumer writes its rows of the output into its rows of the
    block's query buffer (read for the last time by the loops' products), fences, and one TMA
    store of a [1, 1, rows / consumers, n] block copies them out (its own descriptor, made with
    its share of the rows); only then is the buffer released to the producer. Where the output
    does not qualify (the flag), or its columns or element type differ from the queries' (checked
    in the kernel), the pointer store. Compiled for sm_90: a 4-D bulk tensor store; under the
    interpreter the Triton kernel stores through its own descriptor, against float64."""
    schedule_text = (schedule(rows, 64, warps, 2).replace("out.tma(Q, K, V)",
                                                          "out.tma(Q, K, V, out)")
                     + ("; out.persistent(interleaved)" if persistent else ""))
    module, text = compile_source(tmp_path, CAUSAL, schedule_text)
    online = kernel_of(text, "out__kernel_online").split('"""')[2]
    share = rows // (warps // 4)
    assert (f"out__desc = tma.make_tensor_descriptor(out__ptr, [b_size, h_size, m_size, n_size], "
            f"[out__stride0, out__stride1, out__stride2, 1], [1, 1, {share}, n_TILE]") in online
    store = online[online.index("if out__TMA and n_TILE == k_TILE and out__ptr.dtype.element_ty "
                                "== Q_ptr.dtype.element_ty:"):]
    buffer = "_dt_q.index(_dt_q_slot)" if persistent else "_dt_q"
    if warps == 8:
        buffer += f".slice(_dt_which * {share}, {share}, dim=2)"
    steps = [f"_dt_o = {buffer}\n",
             f"_dt_o.store(out_.to(out__ptr.dtype.element_ty).reshape([1, 1, {share}, n_TILE]))",
             "fence_async_shared()",
             "tma.async_copy_shared_to_global(out__desc, [tl.cast(b_start, tl.int32), "
             "tl.cast(h_start, tl.int32), "
             + (f"(tl.cast(m_start, tl.int32)) + _dt_which * {share}" if warps == 8
                else "tl.cast(m_start, tl.int32)") + ", 0], _dt_o)",
             "tma.store_wait(0)", "else:", "gl.store(out__ptr"]
    at = [store.index(s) for s in steps]
    assert at == sorted(at), at
    if persistent:  # released after the store, not before the output is computed
        assert store.index("gl.store(out__ptr") < store.index(
            "mbarrier.arrive(_dt_q_empty.index(_dt_q_slot), count=1)")
    assert "fence_async_shared, mbarrier, tma, warpgroup_mma, warpgroup_mma_wait)" in text
    ptx = compile_for_hopper(tmp_path / "prog.py", "out__kernel_gluon", "bf16", tiles=d,
                             num_warps=4)["ptx"]
    assert "cp.async.bulk.tensor.4d.global.shared" in ptx and "ld.local" not in ptx
    torch.manual_seed(9)
    Q, K, V = (torch.randn(2, 2, 150, 16).bfloat16() for _ in range(3))
    torch.testing.assert_close(module.out(Q, K, V).double(), attention(Q, K, V, causal=True),
                               rtol=2e-2, atol=2e-2)
