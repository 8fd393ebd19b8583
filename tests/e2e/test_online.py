"""online(l): a softmax's reductions in one pass over l (docs/language.md, `online`), as
FlashAttention computes attention. Every program runs under the Triton interpreter against
PyTorch written by hand in float64, and against the module's own reference (the plain softmax)
where special values are involved: the rescaled form must give what the plain one gives, NaN,
infinities and all."""
import re

import pytest
import torch

from conftest import compile_source
from hopper import compile_for_hopper

ATTENTION = """Func out, qk, mx, e, s, p;
In Q, K, V;
Var m, n;
RVar k, l;
qk[m, l] = rdot(Q[m, k], K[l, k], k) / sqrt(len(k));
mx[m] = rmax(qk[m, l], l);
e[m, l] = exp(qk[m, l] - mx[m]);
s[m] = rsum(e[m, l], l);
p[m, l] = e[m, l] / s[m];
out[m, n] = rdot(p[m, l], V[l, n], l);
out.compile();
"""

# The causal mask through label values: a query sees the keys at or before its position.
CAUSAL = ATTENTION.replace(
    "qk[m, l] = rdot(Q[m, k], K[l, k], k) / sqrt(len(k));",
    "qk[m, l] = where(l <= m, rdot(Q[m, k], K[l, k], k) / sqrt(len(k)), -inf);")

# Every Func of the softmax computed in out's kernel, inline: along l one tile at a time.
FUSED = "p.fuse_at(out, m); e.fuse_at(out, m); s.fuse_at(out, m); qk.fuse_at(out, m); " \
        "mx.fuse_at(out, m); "


def attention(Q, K, V, causal=False):
    s = Q.double() @ K.double().transpose(-1, -2) / Q.shape[-1] ** 0.5
    if causal:
        mq, ml = s.shape[-2], s.shape[-1]
        s = s.masked_fill(torch.ones(mq, ml, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(s, -1) @ V.double()


def loops_over(text, label):
    """The passes over `label` in the module's kernels: its loops, a loop over whole tiles
    that the `peel` pass puts before a loop's partial tile (`range(0, l_iter_full, 16)`) not
    counted apart from that loop."""
    return len(re.findall(rf"for \w*{label}_iter\w* in range(?!\([^,]+, \w+_full(_\d+)?, )", text))


@pytest.mark.parametrize("schedule", [
    "out.block(m:16); out.tensorize(m:0, n:0, k:0, l:16)",
    "out.block(m:32); out.tensorize(m:0, n:0, k:0, l:32); out.num_warps(8)",
    "out.block(m:16); out.tensorize(m:0, n:0, k:16, l:16)",
    # n in steps: the loop over l runs once per n tile
    "out.block(m:16, n:16); out.tensorize(m:0, n:0, k:0, l:16)",
    # l whole: one step
    "out.block(m:16); out.tensorize(m:0, n:0, k:0, l:0)",
    # off the tensor cores: l one element at a time
    "out.block(m:4); out.tensorize(m:0, n:0, k:0)",
])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_online_matches_softmax(tmp_path, schedule, causal):
    src = CAUSAL if causal else ATTENTION
    module, text = compile_source(tmp_path, src, FUSED + schedule + "; out.online(l); out.compile()")
    assert "online over l" in text
    torch.manual_seed(0)
    for m, l, d in [(48, 80, 32), (33, 47, 16), (80, 48, 16)]:
        Q, K, V = torch.randn(m, d), torch.randn(l, d), torch.randn(l, d)
        got = module.out(Q, K, V)
        torch.testing.assert_close(got.double(), attention(Q, K, V, causal), rtol=2e-4, atol=2e-4)


def test_one_loop_over_the_keys_instead_of_three(tmp_path):
    schedule = FUSED + "out.block(m:16); out.tensorize(m:0, n:0, k:0, l:16)"
    _, plain = compile_source(tmp_path, ATTENTION, schedule + "; out.compile()", name="plain")
    _, online = compile_source(tmp_path, ATTENTION, schedule + "; out.online(l); out.compile()",
                               name="online")
    # The maximum, the sum and the product each walk the keys (and the Funcs varying along l
    # are computed into temporaries, walking them again); online, one loop does it all.
    assert loops_over(plain, "l") >= 3
    assert loops_over(online, "l") == 1
    # Q Kᵀ is computed once per step, not once per reduction.
    kernel = online[online.index("def out_"):]
    assert kernel.count("tl.dot(") == 2


# bfloat16 tl.dot cannot run under the interpreter (test_conformance.py says why); float16 goes
# through the same operand casts.
def test_causal_mask_skips_the_keys_after_the_block(tmp_path):
    """Keys past a block's last query have score -inf and add exp(-inf) = 0: the loop stops at
    the block's end, so causal attention reads about half the keys. A mask whose hidden value
    is not -inf hides nothing for sure, and the loop walks every key."""
    schedule = FUSED + "out.block(m:16); out.tensorize(m:0, n:0, k:0, l:16); out.online(l)"
    _, causal = compile_source(tmp_path, CAUSAL, schedule + "; out.compile()", name="causal")
    assert re.search(r"l_stop = tl.minimum\(m_end, l_size\)", causal)
    # The key tiles before the block's first query need no mask: a loop of their own, then the
    # tiles on the diagonal with the mask, up to the block's end.
    assert re.search(r"l_diagonal = tl.minimum\(m_start // 16 \* 16, l_stop\)", causal)
    before, diagonal = causal.split("for l_iter in range(0, l_diagonal, 16):")[1].split(
        "for r2_l_iter in range(l_diagonal, l_stop, 16):")
    assert "<= m_idx" not in before and "<= m_idx" in diagonal.split("\n\n")[0]
    # The query tile both loops multiply is loaded once, before them.
    assert causal.count("tl.load(Q_ptr") + causal.count("Q_tile = tl.load(") == 1, causal
    assert "Q_tile_2" not in causal
    _, plain = compile_source(tmp_path, ATTENTION, schedule + "; out.compile()", name="plain")
    assert "l_stop" not in plain and "for l_iter in range(0, l_size, 16)" in plain
    module, soft = compile_source(tmp_path, CAUSAL.replace("-inf);", "-1e4);"),
                                  schedule + "; out.compile()", name="soft")
    assert "l_stop" not in soft
    torch.manual_seed(6)
    Q, K, V = torch.randn(40, 16), torch.randn(40, 16), torch.randn(40, 16)
    s = Q.double() @ K.double().T / 4
    s = s.masked_fill(torch.ones(40, 40, dtype=torch.bool).triu(1), -1e4)
    torch.testing.assert_close(module.out(Q, K, V).double(), torch.softmax(s, -1) @ V.double(),
                               rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("dtype", [torch.float16])
def test_attention_in_half_precision(tmp_path, dtype):
    module, _ = compile_source(tmp_path, ATTENTION, FUSED + "out.block(m:16); "
                               "out.tensorize(m:0, n:0, k:0, l:16); out.online(l); out.compile()")
    torch.manual_seed(1)
    Q, K, V = (torch.randn(40, 16).to(dtype), torch.randn(72, 16).to(dtype),
               torch.randn(72, 16).to(dtype))
    got = module.out(Q, K, V)
    assert got.dtype == dtype
    torch.testing.assert_close(got.double(), attention(Q, K, V), rtol=3e-2, atol=3e-2)


def test_special_values_as_the_plain_softmax_gives_them(tmp_path):
    """Rows whose scores are all -inf (0 / 0: NaN), a -inf key in the first tile of a row, +inf
    and NaN scores: the rescaled sums give what the plain softmax gives."""
    module, _ = compile_source(tmp_path, ATTENTION.replace(
        "rdot(Q[m, k], K[l, k], k) / sqrt(len(k))", "S[m, l]").replace("In Q, K, V;", "In S, V;")
        .replace("RVar k, l;", "RVar l;"),
        FUSED + "out.block(m:16); out.tensorize(m:0, n:0, l:16); out.online(l); out.compile()")
    torch.manual_seed(2)
    S, V = torch.randn(32, 48), torch.randn(48, 16)
    S[0, :] = float("-inf")                # every score -inf: NaN
    S[1, :16] = float("-inf")              # the first tile -inf, later ones finite
    S[2, 5] = float("inf")                 # +inf: NaN
    S[3, 40] = float("nan")                # NaN: NaN
    S[4, 17] = float("-inf")               # one -inf: weight 0
    S[5, :] = 1e30                         # large and equal: uniform weights
    got = module.out(S, V)
    want = module.reference(S, V)
    oracle = torch.softmax(S.double(), -1) @ V.double()
    torch.testing.assert_close(want.double(), oracle, rtol=1e-5, atol=1e-5, equal_nan=True)
    torch.testing.assert_close(got.double(), oracle, rtol=2e-4, atol=2e-4, equal_nan=True)
    assert got[0].isnan().all() and got[2].isnan().all() and got[3].isnan().all()
    assert not got[1].isnan().any() and not got[4].isnan().any()


def test_batch_and_heads_from_transposed_views(tmp_path):
    """[b, h, s, d] inputs, each program one (batch, head, query block), taken as torch gives
    them: q.transpose(1, 2) of a [b, s, h, d] tensor is a strided view, not copied."""
    src = """Func out, qk, mx, e, s, p;
In Q, K, V;
Var b, h, m, n;
RVar k, l;
qk[b, h, m, l] = rdot(Q[b, h, m, k], K[b, h, l, k], k) / sqrt(len(k));
mx[b, h, m] = rmax(qk[b, h, m, l], l);
e[b, h, m, l] = exp(qk[b, h, m, l] - mx[b, h, m]);
s[b, h, m] = rsum(e[b, h, m, l], l);
p[b, h, m, l] = e[b, h, m, l] / s[b, h, m];
out[b, h, m, n] = rdot(p[b, h, m, l], V[b, h, l, n], l);
out.compile();
"""
    module, text = compile_source(tmp_path, src, FUSED + "out.block(b:1, h:1, m:16); out.tensorize(m:0, n:0, k:0, l:16);"
                                  " out.map(b, h, m); out.online(l); out.compile()")
    assert loops_over(text, "l") == 1
    kernel = text[text.index("def out_"):]
    assert kernel.count("tl.dot(") == 2  # on the tensor cores, batch and head one index each
    torch.manual_seed(3)
    b, sq, sk, h, d = 2, 24, 40, 3, 16
    q = torch.randn(b, sq, h, d).transpose(1, 2)
    k = torch.randn(b, sk, h, d).transpose(1, 2)
    v = torch.randn(b, sk, h, d).transpose(1, 2)
    assert not q.is_contiguous()
    got = module.out(q, k, v)
    torch.testing.assert_close(got.double(), attention(q, k, v), rtol=2e-4, atol=2e-4)


def test_log_sum_exp_stored_beside_the_output(tmp_path):
    """The row's log-sum-exp, which FlashAttention's backward reads, from the same loop."""
    src = ATTENTION.replace("Func out,", "Func out, lse,").replace(
        "out[m, n] =", "lse[m] = mx[m] + log(s[m]);\nout[m, n] =")
    module, text = compile_source(tmp_path, src, FUSED + "lse.store_in(out); "
                                  "out.block(m:16); out.tensorize(m:0, n:0, k:0, l:16); "
                                  "out.online(l); out.compile()")
    assert loops_over(text, "l") == 1
    torch.manual_seed(4)
    Q, K, V = torch.randn(40, 16), torch.randn(56, 16), torch.randn(56, 16)
    out, lse = module.out(Q, K, V)
    torch.testing.assert_close(out.double(), attention(Q, K, V), rtol=2e-4, atol=2e-4)
    scores = Q.double() @ K.double().T / 4
    torch.testing.assert_close(lse.double(), torch.logsumexp(scores, -1), rtol=1e-4, atol=1e-4)


def test_cross_entropy_in_one_pass(tmp_path):
    """A loss per row: log-sum-exp minus the target's logit, the maximum read both inside the
    sum and outside it, the target's logit gathered in the same loop."""
    src = """Func loss, mx;
In P; In T: int(y);
Var x; RVar y;
mx[x] = rmax(P[x, y], y);
loss[x] = log(rsum(exp(P[x, y] - mx[x]), y)) + mx[x] - rsum(where(y == T[x], P[x, y], 0), y);
loss.compile();
"""
    module, text = compile_source(tmp_path, src, "mx.fuse_at(loss, x); loss.block(x:4); "
                                  "loss.tensorize(x:0, y:32); loss.online(y); loss.compile()")
    assert loops_over(text, "y") == 1
    torch.manual_seed(5)
    P = torch.randn(10, 100) * 5
    T = torch.randint(0, 100, (10,))
    got = module.loss(P, T)
    want = torch.nn.functional.cross_entropy(P.double(), T, reduction="none")
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5)


def test_canonical_text(tmp_path):
    """online prints after store_in and before num_warps, once, and replays to itself."""
    from conftest import run_dtc
    src = tmp_path / "a.dt"
    src.write_text(ATTENTION)
    schedule = ("out.num_warps(8); out.online(l); " + FUSED +
                "out.block(m:16); out.tensorize(m:0, n:0, k:0, l:16); out.online(l)")
    r = run_dtc(src, "--schedule", schedule, "--canonical")
    assert r.returncode == 0, r.stderr
    text = r.stdout.strip()
    assert text.count("online(l)") == 1
    assert text.index("out.tensorize(") < text.index("out.online(l)") < text.index("out.num_warps(8)")
    again = run_dtc(src, "--schedule", text, "--canonical")
    assert again.stdout.strip() == text


def test_flash_attention_compiles_for_hopper(tmp_path, dtc_binary):
    """The template's default schedule, compiled ahead of time for sm_90 (no GPU needed: the
    Triton wheel ships ptxas) at d = 128 in float16: both products on the Hopper tensor cores
    (wgmma), nothing spilled to local memory (tests/hopper.py)."""
    from conftest import ROOT, run_dtc
    out = tmp_path / "flash_attention.py"
    assert run_dtc(ROOT / "templates" / "flash_attention.dt", "-o", out).returncode == 0
    ptx = compile_for_hopper(out, "out__kernel", "fp16", 128, num_warps=4, num_stages=2)["ptx"]
    assert ptx.count("wgmma.mma_async") >= 2
    assert "ld.local" not in ptx and "st.local" not in ptx


def test_no_keys_gives_the_empty_sum(tmp_path):
    """With no key at all every sum over l is empty: 0, as the plain softmax's product gives,
    not 0 / 0 from the denominator taken out of the product."""
    module, _ = compile_source(tmp_path, ATTENTION, FUSED + "out.block(m:16); "
                               "out.tensorize(m:0, n:0, k:0, l:16); out.online(l); out.compile()")
    Q, K, V = torch.randn(3, 16), torch.randn(0, 16), torch.randn(0, 16)
    got = module.out(Q, K, V)
    assert torch.equal(got, module.reference_out(Q, K, V)) and torch.equal(got, torch.zeros(3, 16))


def test_rows_that_see_no_key_as_the_plain_form_gives_them(tmp_path):
    """A mask that hides every key from the first rows: the plain sums are NaN there
    (exp(-inf - -inf)), and so is the log-sum-exp stored beside the output; the online loop,
    whose sums stay 0 where the maximum stays -inf, gives the same."""
    src = CAUSAL.replace("l <= m", "l <= m - 4").replace("Func out,", "Func out, lse,").replace(
        "out[m, n] =", "lse[m] = mx[m] + log(s[m]);\nout[m, n] =")
    module, _ = compile_source(tmp_path, src, FUSED + "lse.store_in(out); out.block(m:16); "
                               "out.tensorize(m:0, n:0, k:0, l:16); out.online(l); out.compile()")
    torch.manual_seed(7)
    Q, K, V = torch.randn(20, 16), torch.randn(24, 16), torch.randn(24, 16)
    out, lse = module.out(Q, K, V)
    want_out, want_lse = module.reference_out(Q, K, V)
    assert lse[:4].isnan().all() and out[:4].isnan().all()
    torch.testing.assert_close(out, want_out, rtol=2e-4, atol=2e-4, equal_nan=True)
    torch.testing.assert_close(lse, want_lse, rtol=2e-4, atol=2e-4, equal_nan=True)


@pytest.mark.parametrize("causal", [False, True])
def test_scaled_scores_special_values_with_the_maximum_taken_first(tmp_path, causal):
    """The running maximum is taken of the products before their scale (the kernel pass
    `maxfirst`): infinities and NaN in the products, and an empty k (the scale 1/sqrt(0) is
    +inf, every product 0: NaN everywhere), give what the plain softmax gives; so does the
    log-sum-exp, which reads the maximum after the loop."""
    src = (CAUSAL if causal else ATTENTION).replace("Func out,", "Func out, lse,").replace(
        "out[m, n] =", "lse[m] = mx[m] + log(s[m]);\nout[m, n] =")
    module, _ = compile_source(tmp_path, src, FUSED + "lse.store_in(out); out.block(m:16); "
                               "out.tensorize(m:0, n:0, k:0, l:16); out.online(l); out.compile()")
    torch.manual_seed(11)
    Q, K, V = torch.randn(24, 16), torch.randn(40, 16), torch.randn(40, 16)
    Q[1, 3] = float("inf")      # +inf and -inf products, and NaN where K holds a 0
    K[7, 3] = 0.0
    Q[2, 5] = float("nan")      # NaN: NaN
    Q[3] = 1e20                 # products past float32's range after the scale
    Q[4] = 0.0                  # every product 0: uniform weights
    K[9] = float("-inf")        # -inf and +inf products in one key
    for q, k, v in ((Q, K, V), (Q[:, :0], K[:, :0], V)):
        out, lse = module.out(q, k, v)
        want_out, want_lse = module.reference_out(q, k, v)
        torch.testing.assert_close(out, want_out, rtol=2e-4, atol=2e-4, equal_nan=True)
        torch.testing.assert_close(lse, want_lse, rtol=2e-4, atol=2e-4, equal_nan=True)
    assert out.isnan().all() and lse.isnan().all()  # k empty: 0 / sqrt(0) everywhere
