"""PyTorch oracles written by hand, one per thesis program (tests/conformance/*.dt).

The end-to-end tests compare every kernel with the module's `reference`, which dtc generates from
the same checked IR as the kernels: a bug in label alignment, constant folding, the builtins table
or `make_inputs` would be in both and pass unnoticed. These oracles are independent of dtc. Each
one reads the DT program by hand and computes its output in float64 with plain torch operations
(torch.softmax, matmuls, F.gelu, ...), not by mimicking the generated code.

An oracle takes the positional arguments of the compiled Func, as `make_inputs` returns them (In
tensors and SIn scalars in declaration order), and the sizes dict keyed by DT label, and returns
the expected output as a float64 tensor. It first checks that each input has the shape the program
says (so a `make_inputs` that swaps or drops a dimension fails here), and reads every size that
the program uses through `len(...)` from the sizes dict, not from the tensors.

ORACLES maps the stem of a conformance file to its oracle; programs sharing an algorithm (relu in
l3_05/08/09/10/11/16, swish in l3_12..15, sum in l3_17/19/20, softmax in l3_03/l4_02) share one.
A few small programs written by other tests (reductions over k, a matrix product) have oracles
here too, under the names listed in EXTRA.
"""
import math

import torch
import torch.nn.functional as F


def _tensor(name, t, shape):
    """`t` as float64, after checking that it has `shape` (the sizes of its labels)."""
    assert isinstance(t, torch.Tensor), f"{name} should be a tensor, got {type(t).__name__}"
    assert tuple(t.shape) == tuple(shape), f"{name} has shape {tuple(t.shape)}, expected {tuple(shape)}"
    return t.detach().to("cpu", torch.float64)


def _scalar(name, s):
    assert isinstance(s, (int, float)) or (isinstance(s, torch.Tensor) and s.numel() == 1), \
        f"{name} should be a number, got {s!r}"
    return float(s)


def _unpack(args, count):
    assert len(args) == count, f"expected {count} arguments, got {len(args)}"
    return args


# ---------------------------------------------------------------------------------------------
# Element-wise programs.

def fma(args, sizes):
    # f[x, y] = a[x, y] * s + b[x, y];   In a; In b; SIn s
    a, b, s = _unpack(args, 3)
    x, y = sizes["x"], sizes["y"]
    return _tensor("a", a, (x, y)) * _scalar("s", s) + _tensor("b", b, (x, y))


def add_out(args, sizes):
    # add_out[x, y] = alpha * (A[x, y] + B[x, y]);   In A, B; SIn alpha
    A, B, alpha = _unpack(args, 3)
    x, y = sizes["x"], sizes["y"]
    return _scalar("alpha", alpha) * torch.add(_tensor("A", A, (x, y)), _tensor("B", B, (x, y)))


def relu(args, sizes):
    # relu_out[x, y] = maximum(0, A[x, y]);
    (A,) = _unpack(args, 1)
    return torch.relu(_tensor("A", A, (sizes["x"], sizes["y"])))


def swish(args, sizes):
    # tmp[x, y] = sigmoid(beta * A[x, y]);  swish_out[x, y] = A[x, y] * tmp[x, y];   In A; SIn beta
    A, beta = _unpack(args, 2)
    a = _tensor("A", A, (sizes["x"], sizes["y"]))
    return a * torch.sigmoid(_scalar("beta", beta) * a)


def geglu(args, sizes):
    # geglu[x, y] = 0.5 * A * (1 + tanh(0.7978845608028654 * (A + 0.044715 * pow(A, 3)))) * B:
    # the tanh approximation of GELU (0.7978845608028654 = sqrt(2 / pi)) of A, gated by B.
    A, B = _unpack(args, 2)
    x, y = sizes["x"], sizes["y"]
    return F.gelu(_tensor("A", A, (x, y)), approximate="tanh") * _tensor("B", B, (x, y))


# ---------------------------------------------------------------------------------------------
# Reductions.

def softmax(args, sizes):
    # Row softmax over y (l3_03: exp_A / reshape(sum_exp_A[x], x, 1); l4_02: the same, fused).
    (A,) = _unpack(args, 1)
    return torch.softmax(_tensor("A", A, (sizes["x"], sizes["y"])), dim=1)


def rms_norm(args, sizes):
    # rms_norm_out[x, y] = X[x, y] * rsqrt(rsum(pow(X[x, k], 2), k) / len(y) + Eps) * (Offset + W[y]);
    # In X, W; SIn Eps, Offset. k and y both label axis 1 of X.
    X, W, eps, offset = _unpack(args, 4)
    x, y = sizes["x"], sizes["y"]
    assert sizes.get("k", y) == y, "k and y label the same axis of X"
    X = _tensor("X", X, (x, y))
    W = _tensor("W", W, (y,))
    mean_square = (X * X).sum(dim=1, keepdim=True) / y
    return X / torch.sqrt(mean_square + _scalar("Eps", eps)) * (_scalar("Offset", offset) + W)


def row_sum(args, sizes):
    # sum_out[x] = rsum(A[x, k], k);
    (A,) = _unpack(args, 1)
    return _tensor("A", A, (sizes["x"], sizes["k"])).sum(dim=1)


def row_max(args, sizes):
    # r[x] = rmax(A[x, k], k);
    (A,) = _unpack(args, 1)
    return _tensor("A", A, (sizes["x"], sizes["k"])).amax(dim=1)


def row_min(args, sizes):
    # r[x] = rmin(A[x, k], k);
    (A,) = _unpack(args, 1)
    return _tensor("A", A, (sizes["x"], sizes["k"])).amin(dim=1)


# ---------------------------------------------------------------------------------------------
# Matrix products.

def matmul(args, sizes):
    # C[m, n] = rdot(A[m, k], B[k, n], k);
    A, B = _unpack(args, 2)
    m, n, k = sizes["m"], sizes["n"], sizes["k"]
    return _tensor("A", A, (m, k)) @ _tensor("B", B, (k, n))


def two_mm(args, sizes):
    # mm[m, l] = rdot(A[m, k], B[k, l], k);  _2mm[m, n] = rdot(mm[m, l], C[l, n], l);
    A, B, C = _unpack(args, 3)
    m, n, k, l = sizes["m"], sizes["n"], sizes["k"], sizes["l"]
    return (_tensor("A", A, (m, k)) @ _tensor("B", B, (k, l))) @ _tensor("C", C, (l, n))


def attention(args, sizes):
    # mm[m, l] = rdot(A[m, k], B[k, l], k) / sqrt(len(l));  e = exp(mm);  dvsr[m] = rsum(e, l);
    # sm = e / dvsr;  attention[m, n] = rdot(sm[m, l], C[l, n], l):
    # softmax over l of the scaled scores, times C.
    A, B, C = _unpack(args, 3)
    m, n, k, l = sizes["m"], sizes["n"], sizes["k"], sizes["l"]
    scores = _tensor("A", A, (m, k)) @ _tensor("B", B, (k, l)) / math.sqrt(l)
    return torch.softmax(scores, dim=1) @ _tensor("C", C, (l, n))


# ---------------------------------------------------------------------------------------------
# Liger-Kernel's forward kernels (templates/*.yaml): each from its definition, in float64.

def _whole(name, s):
    assert isinstance(s, int) and not isinstance(s, bool), f"{name} should be an int, got {s!r}"
    return s


def _positions(name, t, shape):
    """An integer input: its values as int64, after checking its shape and dtype."""
    assert isinstance(t, torch.Tensor) and not t.is_floating_point(), \
        f"{name} should be an integer tensor, got {t!r}"
    assert tuple(t.shape) == tuple(shape), \
        f"{name} has shape {tuple(t.shape)}, expected {tuple(shape)}"
    return t.detach().to("cpu", torch.int64)


def swiglu(args, sizes):
    # swiglu[x, y] = A[x, y] * sigmoid(A[x, y]) * B[x, y]: silu(A) gated by B.
    A, B = _unpack(args, 2)
    x, y = sizes["x"], sizes["y"]
    return F.silu(_tensor("A", A, (x, y))) * _tensor("B", B, (x, y))


def dyt(args, sizes):
    # dyt[x, y] = gamma[y] * tanh(alpha * X[x, y]) + beta[y];   In X; SIn alpha; In gamma, beta
    X, alpha, gamma, beta = _unpack(args, 4)
    x, y = sizes["x"], sizes["y"]
    X = _tensor("X", X, (x, y))
    return _tensor("gamma", gamma, (y,)) * torch.tanh(_scalar("alpha", alpha) * X) + \
        _tensor("beta", beta, (y,))


def relu_squared(args, sizes):
    # relu_squared[x, y] = square(relu(A[x, y]));
    (A,) = _unpack(args, 1)
    return torch.relu(_tensor("A", A, (sizes["x"], sizes["y"]))) ** 2


def layer_norm(args, sizes):
    # Each row of X less its mean, over the root of its variance plus eps, times W plus B.
    X, W, B, eps = _unpack(args, 4)
    x, y = sizes["x"], sizes["y"]
    X = _tensor("X", X, (x, y))
    var, mean = torch.var_mean(X, dim=1, unbiased=False, keepdim=True)
    return (X - mean) / torch.sqrt(var + _scalar("eps", eps)) * _tensor("W", W, (y,)) + \
        _tensor("B", B, (y,))


def group_norm(args, sizes):
    # X[b, g, c, s]: each (b, g) normalized over its c and s together; W, B [g, c] per channel.
    X, W, B, eps = _unpack(args, 4)
    b, g, c, s = sizes["b"], sizes["g"], sizes["c"], sizes["s"]
    X = _tensor("X", X, (b, g, c, s))
    var, mean = torch.var_mean(X.reshape(b, g, c * s), dim=2, unbiased=False)
    std = torch.sqrt(var + _scalar("eps", eps))
    normal = (X - mean[:, :, None, None]) / std[:, :, None, None]
    W, B = _tensor("W", W, (g, c)), _tensor("B", B, (g, c))
    return normal * W[None, :, :, None] + B[None, :, :, None]


def rope(args, sizes):
    # Q, K [b, s, h, d] rotated by position with Llama's half-split layout: x cos + rotate_half(x)
    # sin, rotate_half(x) = [-x2, x1]; the tables C, S [s, d] are read in their first halves,
    # repeated for both halves of a row. Returns (q, k).
    Q, K, C, S = _unpack(args, 4)
    b, s, h, d = sizes["b"], sizes["s"], sizes["h"], sizes["d"]
    assert d % 2 == 0, "the head dimension splits into two halves"
    half = d // 2
    cos = _tensor("C", C, (s, d))[:, :half].repeat(1, 2)[None, :, None, :]
    sin = _tensor("S", S, (s, d))[:, :half].repeat(1, 2)[None, :, None, :]

    def rotated(name, t):
        t = _tensor(name, t, (b, s, h, d))
        return t * cos + torch.cat([-t[..., half:], t[..., :half]], dim=-1) * sin

    return rotated("Q", Q), rotated("K", K)


def kl_div(args, sizes):
    # kl_div[x] = sum over y of T * (log(max(T, eps)) - P): P log-probabilities, T probabilities.
    P, T, eps = _unpack(args, 3)
    x, y = sizes["x"], sizes["y"]
    T = _tensor("T", T, (x, y))
    return (T * (torch.log(T.clamp(min=_scalar("eps", eps))) - _tensor("P", P, (x, y)))).sum(dim=1)


def jsd(args, sizes):
    # Generalized JSD of the log-probabilities X (log Q) and Y (log P) per row:
    # beta KL(P || M) + (1 - beta) KL(Q || M), M = beta P + (1 - beta) Q; beta 0: KL(P || Q),
    # beta 1: KL(Q || P).
    beta, X, Y = _unpack(args, 3)
    x, y = sizes["x"], sizes["y"]
    X, Y, beta = _tensor("X", X, (x, y)), _tensor("Y", Y, (x, y)), _scalar("beta", beta)
    P, Q = torch.exp(Y), torch.exp(X)
    if beta == 0:
        return F.kl_div(X, Y, reduction="none", log_target=True).sum(dim=1)
    if beta == 1:
        return F.kl_div(Y, X, reduction="none", log_target=True).sum(dim=1)
    M = beta * P + (1 - beta) * Q
    return (beta * P * (Y - torch.log(M)) + (1 - beta) * Q * (X - torch.log(M))).sum(dim=1)


def tvd(args, sizes):
    # tvd[x] = sum over y of |P - Q| / 2.
    P, Q = _unpack(args, 2)
    x, y = sizes["x"], sizes["y"]
    return (_tensor("P", P, (x, y)) - _tensor("Q", Q, (x, y))).abs().sum(dim=1) / 2


def cross_entropy(args, sizes):
    # Each row's cross-entropy of the logits P against the class T[x] with label smoothing eps,
    # 0 where T[x] is ignore: (1 - eps) (-log p[T[x]]) + eps mean_y(-log p), p = softmax(P[x]),
    # as torch's cross_entropy(reduction="none") defines it (which refuses eps above 1).
    P, T, ignore, eps = _unpack(args, 4)
    x, y = sizes["x"], sizes["y"]
    logp = torch.log_softmax(_tensor("P", P, (x, y)), dim=1)
    T, eps = _positions("T", T, (x,)), _scalar("eps", eps)
    kept = T != _whole("ignore", ignore)
    nll = -logp.gather(1, torch.where(kept, T, 0)[:, None])[:, 0]
    return torch.where(kept, (1 - eps) * nll - eps * logp.mean(dim=1), 0.0)


def add_rms_norm(args, sizes):
    # s = X + R; add_rmsnorm = s / sqrt(mean(s^2) + eps) * W. Returns (the norm, s).
    X, R, W, eps = _unpack(args, 4)
    x, y = sizes["x"], sizes["y"]
    s = _tensor("X", X, (x, y)) + _tensor("R", R, (x, y))
    norm = s * torch.rsqrt(s.pow(2).mean(dim=1, keepdim=True) + _scalar("eps", eps))
    return norm * _tensor("W", W, (y,)), s


def cross_entropy_grad(args, sizes):
    # The gradient of each row's cross-entropy (as cross_entropy above) with respect to the
    # logits, by autograd, and the losses: (gradient, loss).
    P, T, ignore, eps = _unpack(args, 4)
    logits = _tensor("P", P, (sizes["x"], sizes["y"])).requires_grad_()
    T, eps = _positions("T", T, (sizes["x"],)), _scalar("eps", eps)
    kept = T != _whole("ignore", ignore)
    logp = torch.log_softmax(logits, dim=1)
    nll = -logp.gather(1, torch.where(kept, T, 0)[:, None])[:, 0]
    loss = torch.where(kept, (1 - eps) * nll - eps * logp.mean(dim=1), 0.0)
    loss.sum().backward()
    return logits.grad, loss.detach()


def embedding(args, sizes):
    # embedding[t, d] = E[Tok[t], d]: rows of the table E [v, d].
    E, Tok = _unpack(args, 2)
    t, d, v = sizes["t"], sizes["d"], sizes["v"]
    return F.embedding(_positions("Tok", Tok, (t,)), _tensor("E", E, (v, d)))


# The templates of Liger's kernels (templates/*.yaml), by kernel name.
KERNEL_SET = {
    "rmsnorm": rms_norm,
    "swiglu": swiglu,
    "geglu": geglu,
    "dyt": dyt,
    "softmax": softmax,
    "layernorm": layer_norm,
    "groupnorm": group_norm,
    "rope": rope,
    "relu_squared": relu_squared,
    "kl_div": kl_div,
    "jsd": jsd,
    "tvd": tvd,
    "cross_entropy": cross_entropy,
    "embedding": embedding,
    "add_rmsnorm": add_rms_norm,
    "cross_entropy_grad": cross_entropy_grad,
}

ORACLES = {
    "fma": fma,
    "l3_01_add_out": add_out,
    "l3_03_softmax": softmax,
    "l3_04_rms_norm": rms_norm,
    "l3_05_relu": relu,
    "l3_08_relu_block": relu,
    "l3_09_relu_tensorize": relu,
    "l3_10_relu_block_tensorize": relu,
    "l3_11_relu_map": relu,
    "l3_12_swish": swish,
    "l3_13_swish_fuse_y": swish,
    "l3_14_swish_fuse_x": swish,
    "l3_15_swish_fuse_x_tensorized": swish,
    "l3_16_relu_warps_stages": relu,
    "l3_17_sum": row_sum,
    "l3_19_sum_tensorize": row_sum,
    "l3_20_sum_block_reduction": row_sum,
    "l4_01_geglu": geglu,
    "l4_02_softmax": softmax,
    "l4_03_2mm": two_mm,
    "l4_04_attention": attention,
}

# Oracles of programs that tests write themselves (not conformance files).
EXTRA = {"rsum": row_sum, "rmax": row_max, "rmin": row_min, "matmul": matmul}


def oracle_for(path_or_stem):
    """The oracle of a conformance file (a path, file name or stem)."""
    stem = str(path_or_stem).rsplit("/", 1)[-1].removesuffix(".dt")
    return ORACLES[stem]
