"""Label values, whole numbers, integer inputs, shifted positions and gathers (docs/language.md,
"Positions and whole numbers"), each compiled under several schedules, run under the Triton
interpreter and compared with PyTorch written by hand, and with the module's own reference."""
import pytest
import torch

from conftest import compile_source


def build(tmp_path, source, schedule=None):
    return compile_source(tmp_path, source, schedule)[0]


def close(got, want, rtol=1e-5, atol=1e-5):
    assert got.shape == want.shape, (got.shape, want.shape)
    torch.testing.assert_close(got.double(), want.double(), rtol=rtol, atol=atol, equal_nan=True)


# ---- label values ----------------------------------------------------------------------------

CAUSAL = """Func s; In A; Var m, l;
s[m, l] = where(l <= m, A[m, l], -inf);
s.compile();
"""


@pytest.mark.parametrize("schedule", [
    None,
    "s.tensorize(m:0, l:0)",
    "s.block(m:4, l:8); s.tensorize(m:2, l:4)",
    "s.block(m:1, l:16); s.tensorize(l:0); s.map(l, m)",
])
def test_a_causal_mask_from_label_values(tmp_path, schedule):
    module = build(tmp_path, CAUSAL, schedule)
    for m, l in ((5, 7), (16, 16), (1, 33)):
        A = torch.randn(m, l)
        want = A.masked_fill(torch.ones(m, l, dtype=torch.bool).triu(1), float("-inf"))
        assert torch.equal(module.s(A), want)
        assert torch.equal(module.reference_s(A), want)


WHOLE_ARITHMETIC = """Func f; In A; Var x, y;
f[x, y] = A[x, y] * ((x * 3 + y) % 7) + (y - 5) // 2 + len(y) // 3;
f.compile();
"""


@pytest.mark.parametrize("schedule", [None, "f.tensorize(x:0, y:0)", "f.block(y:8); f.tensorize(y:4)"])
def test_whole_number_arithmetic_rounds_toward_zero(tmp_path, schedule):
    module = build(tmp_path, WHOLE_ARITHMETIC, schedule)
    A = torch.randn(6, 13)
    x = torch.arange(6)[:, None]
    y = torch.arange(13)[None, :]
    want = (A.double() * torch.fmod(x * 3 + y, 7) +
            torch.div(y - 5, 2, rounding_mode="trunc") + 13 // 3)
    close(module.f(A), want)
    close(module.reference_f(A), want)


def test_a_label_value_in_a_reduction(tmp_path):
    # The mean position weighted by each row: a label's value inside rsum.
    module = build(tmp_path, """Func c; In A; Var x; RVar y;
        c[x] = rsum(A[x, y] * y, y) / rsum(A[x, y], y);
        c.compile();""", "c.tensorize(y:0)")
    A = torch.rand(4, 9) + 0.1
    y = torch.arange(9, dtype=torch.float64)
    close(module.c(A), (A.double() * y).sum(1) / A.double().sum(1))


# ---- shifted positions -----------------------------------------------------------------------

ROPE = """Func out; In Q, C, S; Var s, d;
out[s, d] = Q[s, d] * C[s, d] +
    where(d < len(d) // 2, -Q[s, d + len(d) // 2], Q[s, d - len(d) // 2]) * S[s, d];
out.compile();
"""


def rotate_half(q):
    half = q.shape[-1] // 2
    return torch.cat([-q[..., half:], q[..., :half]], dim=-1)


@pytest.mark.parametrize("schedule", [
    None,
    "out.tensorize(s:0, d:0)",
    "out.block(s:2); out.tensorize(s:0, d:0)",
    "out.block(s:1, d:8); out.tensorize(d:4)",
])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_rope_reads_the_other_half_of_each_row(tmp_path, schedule, dtype):
    module = build(tmp_path, ROPE, schedule)
    Q, C, S = (torch.randn(5, 16).to(dtype) for _ in range(3))
    want = Q.double() * C.double() + rotate_half(Q.double()) * S.double()
    tol = {torch.float32: 1e-5, torch.float16: 1e-2, torch.bfloat16: 5e-2}[dtype]
    got = module.out(Q, C, S)
    assert got.dtype == dtype
    close(got, want, tol, tol)


SHIFT = """Func d; In A; Var x;
d[x] = A[x + 2] - A[x] + A[x - 1];
d.compile();
"""


@pytest.mark.parametrize("schedule", [None, "d.tensorize(x:0)", "d.block(x:4); d.tensorize(x:2)"])
def test_a_position_outside_the_tensor_reads_zero(tmp_path, schedule):
    module = build(tmp_path, SHIFT, schedule)
    A = torch.randn(11).double()
    padded = torch.nn.functional.pad(A, (1, 2))  # A[-1] and A[11], A[12] read as 0
    want = padded[3:] - A + padded[:-3]
    close(module.d(A.float()), want)
    close(module.reference_d(A.float()), want)


# ---- integer inputs and gathers --------------------------------------------------------------

GATHER = """Func g; In P; In T: int(y); Var x; RVar y;
g[x] = P[x, T[x]];
g.compile();
"""


@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32, torch.int16, torch.uint8])
@pytest.mark.parametrize("schedule", [None, "g.tensorize(x:0)", "g.block(x:2); g.tensorize(x:2)"])
def test_a_gather_reads_zero_at_an_index_out_of_range(tmp_path, schedule, index_dtype):
    module = build(tmp_path, GATHER, schedule)
    P = torch.randn(7, 11)
    T = torch.tensor([0, 10, 3, 11, 200, 5, 0 if index_dtype == torch.uint8 else -1],
                     dtype=index_dtype)
    t = T.long()
    inside = (t >= 0) & (t < 11)
    want = torch.where(inside, P[torch.arange(7), t.clamp(0, 10)], torch.zeros(()))
    assert torch.equal(module.g(P, T), want)
    assert torch.equal(module.reference_g(P, T), want)


EMBEDDING = """Func emb; In E; In Tok: int(v); Var t, d, v;
emb[t, d] = E[Tok[t], d];
emb.compile();
"""


@pytest.mark.parametrize("schedule", [None, "emb.block(t:1); emb.tensorize(d:0)",
                                      "emb.block(t:4, d:16); emb.tensorize(t:4, d:16)"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_an_embedding_lookup(tmp_path, schedule, dtype):
    module = build(tmp_path, EMBEDDING, schedule)
    E = torch.randn(50, 24).to(dtype)
    Tok = torch.randint(0, 50, (3, 7))[0]
    got = module.emb(E, Tok)
    assert got.dtype == dtype and torch.equal(got, E[Tok])
    args = module.make_inputs_emb({"t": 9, "d": 4, "v": 13})
    assert args[1].dtype == torch.int64 and 0 <= int(args[1].min()) and int(args[1].max()) < 13


CROSS_ENTROPY = """Func m, lse, loss; In P; In T: int(y); SIn ignore: int; SIn eps;
Var x; RVar y;
m[x] = rmax(P[x, y], y);
lse[x] = log(rsum(exp(P[x, y] - m[x]), y)) + m[x];
loss[x] = where(T[x] == ignore, 0,
    lse[x] - (1 - eps) * P[x, T[x]] - eps * rsum(P[x, y], y) / len(y));
loss.compile();
"""


@pytest.mark.parametrize("schedule", [
    None,
    "m.fuse_at(loss, x); lse.fuse_at(loss, x); loss.block(x:1); loss.tensorize(y:0)",
    "m.fuse_at(loss, x); lse.fuse_at(loss, x); loss.block(x:2); loss.tensorize(x:0, y:8)",
])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cross_entropy_with_ignore_index_and_label_smoothing(tmp_path, schedule, dtype):
    module = build(tmp_path, CROSS_ENTROPY, schedule)
    P = (torch.randn(6, 37) * 3).to(dtype)
    T = torch.randint(0, 37, (6,))
    T[2] = -100
    want = torch.nn.functional.cross_entropy(P.double(), T, ignore_index=-100, reduction="none",
                                             label_smoothing=0.1)
    tol = 1e-5 if dtype == torch.float32 else 3e-2
    close(module.loss(P, T, -100, 0.1), want, tol, tol)
    close(module.reference_loss(P, T, -100, 0.1), want, tol, tol)


# ---- checks at the call --------------------------------------------------------------------------

def test_integer_inputs_and_scalars_are_checked(tmp_path):
    module = build(tmp_path, CROSS_ENTROPY)
    P, T = torch.randn(3, 5), torch.tensor([0, 1, 2])
    with pytest.raises(ValueError, match="T holds whole numbers: it must be int64"):
        module.loss(P, T.float(), -100, 0.1)
    with pytest.raises(ValueError, match="P must be float32, float16 or bfloat16"):
        module.loss(P.long(), T, -100, 0.1)
    with pytest.raises(ValueError, match="ignore must be a whole number"):
        module.loss(P, T, -100.5, 0.1)
    with pytest.raises(ValueError, match="T has shape|T must have 1 dimension"):
        module.loss(P, T[:, None], -100, 0.1)
    # An integer input does not decide the output's dtype.
    assert module.loss(P.half(), T.int(), -100, 0.1).dtype == torch.float16


def test_inf_is_infinity(tmp_path):
    module = build(tmp_path, """Func f; In A; Var x;
        f[x] = minimum(A[x], inf) + where(A[x] > 0, 0, -inf);
        f.compile();""")
    A = torch.tensor([1.0, -2.0, 0.5])
    assert torch.equal(module.f(A), torch.tensor([1.0, float("-inf"), 0.5]))


def test_a_scalar_input_s_written_value_is_what_make_inputs_passes(tmp_path):
    module = build(tmp_path, """Func f; In A; SIn eps = 1e-6, n: int = -100, s = 007, r;
        Var x;
        f[x] = A[x] * eps + n + s + r;
        f.compile();""")
    A, eps, n, s, r = module.make_inputs_f({"x": 3}, seed=4)
    assert (eps, n, s) == (1e-6, -100, 7) and type(n) is int and 0.5 <= r <= 1.5
    close(module.f(A, eps, n, s, r), A.double() * 1e-6 - 100 + 7 + r)


# ---- found by the differential fuzzer (tests/fuzz/dtfuzz.py) -----------------------------------

def test_a_label_that_only_a_label_value_varies_along_is_a_kernel_size(tmp_path):
    # f0 is computed by a kernel of its own; nothing but the value `r` varies along r there, so
    # that kernel needs r's size as much as one reading A[w, r] would.
    module = build(tmp_path, """Func f0, f2; In I0; Var w; RVar r;
        f0[w] = rsum(r, r);
        f2[w] = f0[w] + I0[w];
        f2.compile();""")
    I0 = torch.randn(5)
    for r in (0, 1, 4, 9):
        want = I0.double() + r * (r - 1) // 2
        close(module.f2(I0, r=r), want)
        close(module.reference_f2(I0, r=r), want)


@pytest.mark.parametrize("schedule", [None, "f.tensorize(x:0)"])
def test_whole_division_of_literals_is_folded_toward_zero(tmp_path, schedule):
    # `//` of two literals is folded at compile time; it folded to 0 whatever the operands.
    module = build(tmp_path, """Func f; In A; Var x;
        f[x] = A[x] + 3 // 3 + -7 // 2 + 7 // -2 + 2 // 3 + 100 * (-9 % 4);
        f.compile();""", schedule)
    A = torch.randn(6)
    want = A.double() + 1 - 3 - 3 + 0 - 100
    close(module.f(A), want)
    close(module.reference_f(A), want)


def test_make_inputs_draws_positions_along_a_range_tied_to_another_label(tmp_path):
    # j is T0's range and is tied to x by f0[z, u, x] reading f0[u, z, j] (z and u too);
    # nothing shapes an input with j, so make_inputs never bound it and raised NameError.
    module = build(tmp_path, """Func f0, f1; In T0: int(j); Var x; RVar u, j, z;
        f0[u, z, j] = 1;
        f1[z, x, u] = f0[z, u, x] + T0[x];
        f1.compile();""")
    (T0,) = module.make_inputs_f1({"z": 3, "x": 5, "u": 3, "j": 5}, seed=1)
    assert T0.dtype == torch.int64 and T0.shape == (5,)
    assert 0 <= int(T0.min()) and int(T0.max()) < 5
    got = module.f1(T0, z=3)
    assert torch.equal(got, (1 + T0.float())[None, :, None].expand(3, 5, 3))


INT_OPERANDS = """Func f; In A; In T: int; Var m, n; RVar k;
f[m, n] = rsum(silu(T[m, k]), k) + rdot(T[m, k], A[k, n], k) + rsum(T[m, k] // 2, k) + silu(n);
f.compile();
"""


@pytest.mark.parametrize("schedule", [
    None,
    "f.tensorize(m:0, n:0, k:0)",
    "f.block(m:16, n:16); f.tensorize(m:16, n:16, k:16)",  # rdot on tl.dot
])
def test_whole_numbers_where_numbers_are_wanted_are_converted(tmp_path, schedule):
    # An integer input inside silu, rdot and rsum, a label's value inside silu: the reference
    # applied torch to int64 tensors (silu and matmul of Long raise), and tl.dot took the
    # loaded int64 tile as it was.
    module = build(tmp_path, INT_OPERANDS, schedule)
    T = torch.randint(-8, 16, (5, 7))
    A = torch.randn(7, 6)
    n = torch.arange(6, dtype=torch.float64)
    want = (torch.nn.functional.silu(T.double()).sum(1, keepdim=True) + T.double() @ A.double()
            + torch.div(T, 2, rounding_mode="trunc").sum(1, keepdim=True)
            + torch.nn.functional.silu(n))
    tol = 1e-2 if schedule and "16" in schedule else 1e-5   # tl.dot may round to tf32
    close(module.f(A, T), want, tol, tol)
    close(module.reference_f(A, T), want)


@pytest.mark.parametrize("schedule", [None, "f.block(r:8)", "f.block(r:4); f.tensorize(r:2)",
                                      "f.tensorize(r:0, z:0)"])
def test_whole_division_of_scalars_rounds_toward_zero(tmp_path, schedule):
    # A loop's index, a size and an integer scalar are Python ints under the interpreter (and a
    # size of 1 is one on the GPU): their `//` and `%` rounded toward -inf, so r // -2 was -1
    # at r = 1.
    module = build(tmp_path, """Func f; SIn n: int; Var z; RVar r;
        f[r, z] = r // -2 + 10 * (r % -3) + 100 * ((len(z) - 7) // 2) + 1000 * ((n - 7) % 3)
            + 10000 * (n // -2);
        f.compile();""", schedule)
    r = torch.arange(9)[:, None]
    for z, n in ((1, 0), (3, 5), (2, -3)):
        trunc = lambda a, b: torch.div(torch.as_tensor(a), b, rounding_mode="trunc")  # noqa: E731
        want = (trunc(r, -2) + 10 * torch.fmod(r, -3) + 100 * trunc(z - 7, 2)
                + 1000 * torch.fmod(torch.tensor(n - 7), 3) + 10000 * trunc(n, -2)).expand(9, z)
        close(module.f(n, r=9, z=z), want)
        close(module.reference_f(n, r=9, z=z), want)


def test_make_inputs_reads_a_range_that_is_no_size_of_the_call(tmp_path):
    # T1 is read as a value only, so n is no size of f3's call; make_inputs drew 0 .. 15
    # whatever len(n) the sizes gave, not positions along n.
    module = build(tmp_path, """Func f3; In T1: int(n); RVar r, n;
        f3[r] = T1[r];
        f3.compile();""")
    for n in (1, 3, 40):
        (T1,) = module.make_inputs_f3({"r": 50, "n": n}, seed=2)
        assert T1.dtype == torch.int64 and int(T1.min()) >= 0 and int(T1.max()) < n
        assert torch.equal(module.f3(T1), T1.float())
    (T1,) = module.make_inputs_f3({"r": 50}, seed=2)   # without n: 0 to 15, as before
    assert int(T1.min()) >= 0 and int(T1.max()) < 16
