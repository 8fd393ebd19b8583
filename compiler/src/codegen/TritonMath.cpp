#include "codegen/TritonMath.h"

#include "support/Diagnostics.h"

#include <utility>

namespace dtc {

namespace {

struct Helper {
  const char* name;
  std::vector<const char*> uses; // the helpers its source calls
  const char* source;
};

// The @triton.jit helpers, each accurate to a few float32 ulps over its whole domain, as a
// float64 oracle computes it (tests/e2e/test_math_accuracy.py): no cancellation, no overflow
// before the result overflows, and the exponential and logarithm they build on computed here
// from + - * and exact bit operations (and no float-to-integer conversion, slow on the GPU),
// so that their accuracy is that of the formulas, not that of tl.exp, tl.log and tl.erf (MUFU
// approximations on the GPU, numpy's under the interpreter). A division whose denominator
// stays within the normal range is _dt_div (a reciprocal and a product on the GPU). They are
// also short: every tl.where computes both its sides, so each helper evaluates one
// polynomial per range, not one per formula (_dt_gelu: 72 PTX instructions per element for
// sm_90; v (1 + erf(v / sqrt 2)) / 2 with libdevice's erf, which cancels in the tail, 42).
// tan uses tl.sin and tl.cos, pow float64's tl.exp2 and tl.log2. Every public helper starts
// with tl.cast: under the interpreter a scalar is a Python float.
const std::vector<Helper>& helper_table() {
  static const std::vector<Helper> helpers = {
      {"_dt_exp_parts", {}, R"py(def _dt_exp_parts(a, b):
    # e^(a + b), b small beside a, as (q, k) with e^(a + b) = (1 + q) 2^k: a + b = k ln2 + r,
    # |r| <= ln2 / 2 (ln2 in two parts, k * 0.693145751953125 exact), q = e^r - 1 as
    # r + r^2 P(r), P of degree 4 fitted to within 3e-9 of 1 + q. k, an int32, is rounded by
    # adding 1.5 * 2^23 and read from the sum's bits (no conversion). The caller keeps a + b
    # within [-150, 90]: k is then within _dt_ldexp's range.
    t = (a + b) * 1.4426950408889634 + 12582912.0
    kf = t - 12582912.0
    r = ((a - kf * 0.693145751953125) + b) - kf * 1.4286068203094173e-06
    q = r + r * r * (0.49999994 + r * (0.16666521 + r * (0.041668385 + r * (
        0.008368723 + r * 0.0013814694))))
    return q, t.to(tl.int32, bitcast=True) - 0x4B400000
)py"},
      {"_dt_div", {}, R"py(def _dt_div(a, b):
    # a / b for a normal b below 2^126 in magnitude, as the callers' denominators are: on the
    # GPU a times b's reciprocal (rcp.approx, within 1 ulp) rounded once (subnormal products
    # kept), within 1.5 ulps where div.full, Triton's `/`, is within 2, in 2 instructions
    # rather than 10. Under the interpreter, and off NVIDIA GPUs, a / b.
    if _DT_PTX:
        return tl.inline_asm_elementwise(
            "{ .reg .f32 r; rcp.approx.ftz.f32 r, $2; mul.rn.f32 $0, $1, r; }", "=r,r,r",
            [a, b], dtype=tl.float32, is_pure=True, pack=1)
    else:
        return a / b
)py"},
      {"_dt_mul_rn", {}, R"py(def _dt_mul_rn(a, b):
    # a * b rounded to float32 on its own (mul.rn), which the GPU compiler never fuses into a
    # multiply-add with an addition that follows: a score minus the maximum of the scores is
    # then at most 0, as PyTorch computes it (kir/RoundBeforeShift.h). Under the interpreter,
    # and off NVIDIA GPUs, a * b.
    if _DT_PTX:
        return tl.inline_asm_elementwise("mul.rn.f32 $0, $1, $2;", "=r,r,r", [a, b],
                                         dtype=tl.float32, is_pure=True, pack=1)
    else:
        return a * b
)py"},
      {"_dt_ldexp", {"_dt_pow2"}, R"py(def _dt_ldexp(x, k):
    # x 2^k for an int32 k in [-252, 254]: two exact powers of two, so that a result below the
    # normal range is rounded once.
    h = k >> 1
    return x * _dt_pow2(h) * _dt_pow2(k - h)
)py"},
      {"_dt_pow2", {}, R"py(def _dt_pow2(k):
    # 2^k for an int32 k in [-126, 127], from its bits.
    return ((k + 127) << 23).to(tl.float32, bitcast=True)
)py"},
      {"_dt_log1p_reduced", {"_dt_div"}, R"py(def _dt_log1p_reduced(f):
    # log(1 + f) for f in [sqrt(1/2) - 1, sqrt(2) - 1]: with s = f / (2 + f), log(1 + f) is
    # 2 atanh(s) = f - (f^2/2 - s (f^2/2 + R)), R = 2s^2/3 + 2s^4/5 + ... (|s| < 0.172, Taylor
    # to s^10: the rest is below 2^-35 of the result).
    s = _dt_div(f, 2.0 + f)
    z = s * s
    r = z * (0.6666667 + z * (0.4 + z * (0.2857143 + z * (0.22222222 + z * 0.18181819))))
    hfsq = 0.5 * f * f
    return f - (hfsq - s * (hfsq + r))
)py"},
      {"_dt_erfcx_near", {}, R"py(def _dt_erfcx_near(t):
    # e^(z^2) erfc(z) for z = t + 1 in [0, 2]: a polynomial fitted to within 3.3e-9.
    p = 1.9196337e-05 * t - 6.326581e-05
    p = p * t + 0.00012969963
    p = p * t - 0.00035833882
    p = p * t + 0.0010510238
    p = p * t - 0.0027833367
    p = p * t + 0.006970723
    p = p * t - 0.01665775
    p = p * t + 0.037572026
    p = p * t - 0.07922747
    p = p * t + 0.15437159
    p = p * t - 0.273212
    return 0.42758358 + (4.3151288e-10 + p * t)
)py"},
      {"_dt_gelu_near", {}, R"py(def _dt_gelu_near(u):
    # e^(z^2) erfc(z) for z = w / sqrt 2 with w = u + 1.625 in [0, 2 sqrt 2]: a polynomial in
    # w itself (no rounding of w / sqrt 2), centred where its float32 evaluation loses least
    # at both ends, fitted to within 3.3e-9.
    p = 2.9955496e-07 * u - 6.4041643e-07
    p = p * u + 1.6919786e-06
    p = p * u - 1.00871985e-05
    p = p * u + 4.188287e-05
    p = p * u - 0.00015683685
    p = p * u + 0.00057904184
    p = p * u - 0.0020413566
    p = p * u + 0.006797881
    p = p * u - 0.021252193
    p = p * u + 0.06172475
    p = p * u - 0.16405946
    return 0.3900462 + (1.1999348e-08 + p * u)
)py"},
      {"_dt_erfcx_far", {}, R"py(def _dt_erfcx_far(s):
    # z e^(z^2) erfc(z) for s = 1 / z^2, z >= 2: a polynomial fitted to within 8e-10.
    p = -93.712883 * s + 137.899887
    p = p * s - 92.8000565
    p = p * s + 39.0826149
    p = p * s - 12.2924967
    p = p * s + 3.44091225
    p = p * s - 1.04750621
    p = p * s + 0.422896862
    p = p * s - 0.282091796
    return 0.564189553 + (1.62694036e-08 + p * s)
)py"},
      {"_dt_tanh", {"_dt_div"}, R"py(def _dt_tanh(v):
    # |v| < 0.75: v (1 + v^2 P(v^2)), P of degree 5 fitted to within 1.7e-9 of tanh; beyond,
    # 1 - 2 / (e^(2|v|) + 1), in [0.63, 1]: no cancellation, and e^(2|v|)'s own error shrunk by
    # 2 / (e^(2|v|) + 1) < 0.37, so that the GPU's exp2 (ex2.approx, within 2 ulps) and
    # reciprocal (_dt_div) leave the result within 3.4 ulps at worst (numpy's exp2 under the
    # interpreter). |v| is clamped to 10, whose tanh is 1 in float32; the sign is v's bit, and
    # NaN and zero's sign come through the product (a NaN fails a >= 0.75).
    v = tl.cast(v, tl.float32)
    a = tl.abs(v)
    s = v * v
    p = v * (1.0 + s * (-0.33333316 + s * (0.13332695 + s * (-0.05389272 + s * (
        0.021452026 + s * (-0.0076572429 + s * 0.0017369282))))))
    e = tl.exp2(tl.minimum(a, 10.0) * 2.8853900817779268)
    t = (1.0 - _dt_div(2.0, e + 1.0)).to(tl.int32, bitcast=True)
    t = (t | (v.to(tl.int32, bitcast=True) & -2147483648)).to(tl.float32, bitcast=True)
    return tl.where(a >= 0.75, t, p)
)py"},
      {"_dt_sinh", {"_dt_exp_parts", "_dt_pow2", "_dt_ldexp", "_dt_div"}, R"py(def _dt_sinh(v):
    # sinh |v| = (m + m / (1 + m)) / 2, m = e^|v| - 1 (as in _dt_expm1): no cancellation near
    # 0; from |v| = 9 on, e^|v| / 2 with the exponent lowered first, so that sinh(89) does not
    # overflow. The sign restored, zero's included.
    v = tl.cast(v, tl.float32)
    a = tl.abs(v)
    q, k = _dt_exp_parts(tl.where(a > 90.0, 90.0, a), 0.0)
    s = _dt_pow2(tl.minimum(k, 30))
    m = q * s + (s - 1.0)
    t = tl.where(a < 9.0, 0.5 * (m + _dt_div(m, 1.0 + m)), _dt_ldexp(1.0 + q, k - 1))
    return tl.where(v < 0.0, -t, tl.where(v == 0.0, v, t))
)py"},
      {"_dt_cosh", {"_dt_exp_parts", "_dt_pow2", "_dt_ldexp", "_dt_div"}, R"py(def _dt_cosh(v):
    # (e^|v| + e^-|v|) / 2; from |v| = 9 on, e^|v| / 2 with the exponent lowered first, so
    # that cosh(89) does not overflow.
    v = tl.cast(v, tl.float32)
    a = tl.abs(v)
    q, k = _dt_exp_parts(tl.where(a > 90.0, 90.0, a), 0.0)
    e = (1.0 + q) * _dt_pow2(tl.minimum(k, 30))
    return tl.where(a < 9.0, 0.5 * e + _dt_div(0.5, e), _dt_ldexp(1.0 + q, k - 1))
)py"},
      {"_dt_tan", {}, R"py(def _dt_tan(v):
    # sin v / cos v: their relative errors add (no cancellation, also next to a pole). Below
    # 2^-12, v + v^3 / 3 (a GPU's sin flushes a tiny value to 0).
    v = tl.cast(v, tl.float32)
    small = v + v * v * v * 0.33333334
    return tl.where(tl.abs(v) < 0.000244140625, small, tl.sin(v) / tl.cos(v))
)py"},
      {"_dt_pow", {}, R"py(def _dt_pow(v, e):
    # pow as IEEE 754 (C99 F.10.4.4) and torch.pow define it. |v|^e is 2^(e log2|v|) in
    # float64, right to the last float32 bit (in float32, log2's rounding would be multiplied
    # by e log2|v|). The base's sign for an odd integer exponent (of -0 and -inf too), NaN for
    # a finite negative base and a non-integer exponent; v^0, 1^e and (-1)^(+-inf) are 1,
    # NaN or not.
    # (Nested tl.where, not & and |: one of v and e may be a scalar, which the interpreter
    # does not broadcast in & and |. -m is 0 - m in Triton, +0 for m = 0: m * -1.0 is -0.)
    v = tl.cast(v, tl.float32)
    e = tl.cast(e, tl.float32)
    a = tl.abs(v)
    m = tl.exp2(e.to(tl.float64) * tl.log2(a.to(tl.float64))).to(tl.float32)
    integer = tl.floor(e) == e
    odd = tl.where(integer, tl.floor(e * 0.5) != e * 0.5, False)
    r = tl.where(v.to(tl.int32, bitcast=True) < 0, tl.where(odd, m * -1.0, m), m)
    finite_negative = tl.where(v < 0.0, v > float("-inf"), False)
    r = tl.where(finite_negative, tl.where(integer, r, float("nan")), r)
    one = tl.where(a == 1.0, tl.abs(e) == float("inf"), False)
    return tl.where(e == 0.0, 1.0, tl.where(v == 1.0, 1.0, tl.where(one, 1.0, r)))
)py"},
      {"_dt_pow_frac", {}, R"py(def _dt_pow_frac(v, e):
    # v^e for a finite non-integer constant e (IEEE 754): |v|^e in float64 as in _dt_pow, +0
    # or +inf for -0 and -inf, NaN for a finite negative base.
    v = tl.cast(v, tl.float32)
    m = tl.exp2(e * tl.log2(tl.abs(v).to(tl.float64))).to(tl.float32)
    return tl.where((v < 0.0) & (v > float("-inf")), float("nan"), m)
)py"},
      {"_dt_pow_half", {}, R"py(def _dt_pow_half(v):
    # v^0.5 as IEEE 754 defines it: sqrt v, correctly rounded (tl.sqrt is an approximation on
    # the GPU, which flushes tiny values), but +0 for -0 and +inf for -inf.
    v = tl.cast(v, tl.float32)
    return tl.where(v == float("-inf"), float("inf"), tl.sqrt_rn(v) + 0.0)
)py"},
      {"_dt_log1p", {"_dt_log1p_reduced"}, R"py(def _dt_log1p(v):
    # log(1 + v): u = 1 + v rounded, u = 2^k (1 + f) with f in [sqrt(1/2) - 1, sqrt(2) - 1]
    # (exact), log(1 + f) by _dt_log1p_reduced, and u's rounding error c = v - (u - 1), or
    # 1 - (u - v) for v > 1 (both exact), added as c / u: for a tiny v, u is 1 and c is v.
    v = tl.cast(v, tl.float32)
    u = 1.0 + v
    c = tl.where(v > 1.0, 1.0 - (u - v), v - (u - 1.0))
    bits = u.to(tl.int32, bitcast=True) + (0x3F800000 - 0x3F3504F3)
    k = ((bits >> 23) - 127).to(tl.float32)
    f = ((bits & 0x007FFFFF) + 0x3F3504F3).to(tl.float32, bitcast=True) - 1.0
    low = k * 1.4286068203094173e-06 + c / u
    out = k * 0.693145751953125 + (_dt_log1p_reduced(f) + low)
    out = tl.where(v == -1.0, float("-inf"), tl.where(v < -1.0, float("nan"), out))
    return tl.where((v == float("inf")) | (v == 0.0), v, out)
)py"},
      {"_dt_expm1", {"_dt_exp_parts", "_dt_pow2", "_dt_ldexp"}, R"py(def _dt_expm1(v):
    # e^v - 1 = 2^k q + (2^k - 1) with q = e^r - 1 (_dt_exp_parts): no cancellation; past
    # |v| = 17 it is e^v, or -1, in float32. Zero keeps its sign.
    v = tl.cast(v, tl.float32)
    q, k = _dt_exp_parts(tl.where(v > 90.0, 90.0, tl.where(v < -20.0, -20.0, v)), 0.0)
    s = _dt_pow2(tl.minimum(k, 30))
    out = tl.where(v > 17.0, _dt_ldexp(1.0 + q, k), tl.where(v < -17.0, -1.0, q * s + (s - 1.0)))
    return tl.where(v == 0.0, v, out)
)py"},
      {"_dt_log10", {"_dt_log1p_reduced"}, R"py(def _dt_log10(v):
    # log10 v = k log10(2) + log(1 + f) / ln 10 for v = 2^k (1 + f), f in
    # [sqrt(1/2) - 1, sqrt(2) - 1] (exact), log10(2) in two parts (k * 0.30102920532 exact);
    # a subnormal v is scaled by 2^25 first.
    v = tl.cast(v, tl.float32)
    tiny = v < 1.1754944e-38
    bits = tl.where(tiny, v * 33554432.0, v).to(tl.int32, bitcast=True)
    bits = bits + (0x3F800000 - 0x3F3504F3)
    k = ((bits >> 23) - 127).to(tl.float32) - tl.where(tiny, 25.0, 0.0)
    f = ((bits & 0x007FFFFF) + 0x3F3504F3).to(tl.float32, bitcast=True) - 1.0
    low = k * 7.9034151668e-07 + _dt_log1p_reduced(f) * 0.4342944819032518
    out = k * 0.30102920532226562 + low
    out = tl.where(v == 0.0, float("-inf"), tl.where(v < 0.0, float("nan"), out))
    return tl.where((v == float("inf")) | (v != v), v, out)
)py"},
      {"_dt_erfc",
       {"_dt_exp_parts", "_dt_ldexp", "_dt_erfcx_near", "_dt_erfcx_far", "_dt_div"},
       R"py(def _dt_erfc(v):
    # With w = |v|, erfc w = e^(-w^2) erfcx(w), w^2 exact as hi^2 + lo (w + hi) (hi = w to 12
    # bits), erfcx from _dt_erfcx_near/_far (no cancellation: erfc w is in (0, 1]), and
    # erfc v = 2 - erfc w for v < 0 (in [1, 2)).
    v = tl.cast(v, tl.float32)
    w = tl.abs(v)
    hi = (w.to(tl.int32, bitcast=True) & -4096).to(tl.float32, bitcast=True)
    lo = w - hi
    q, k = _dt_exp_parts(tl.maximum(-(hi * hi), -150.0), -(lo * (w + hi)))
    r = _dt_div(1.0, tl.maximum(w, 2.0))
    g = tl.where(w < 2.0, _dt_erfcx_near(w - 1.0), _dt_erfcx_far(r * r) * r)
    tail = tl.where(w > 10.1, 0.0, _dt_ldexp(g + q * g, k))
    return tl.where(v < 0.0, 2.0 - tail, tail)
)py"},
      {"_dt_sign", {}, R"py(def _dt_sign(v):
    return tl.where(v > 0, 1.0, tl.where(v < 0, -1.0, 0.0))
)py"},
      {"_dt_silu", {"_dt_exp_parts", "_dt_ldexp", "_dt_div"}, R"py(def _dt_silu(v):
    # v sigmoid(v) with t = e^-|v| = (1 + q) 2^k: v / (1 + t) for v >= 0, v t / (1 + t) below,
    # 2^k applied last so that a tiny result is rounded once; one division.
    v = tl.cast(v, tl.float32)
    a = tl.abs(v)
    q, k = _dt_exp_parts(-tl.where(a > 150.0, 150.0, a), 0.0)
    y = _dt_div(tl.where(v >= 0.0, v, v * (1.0 + q)), 1.0 + _dt_ldexp(1.0 + q, k))
    return tl.where(v >= 0.0, y, tl.where(v < -120.0, v * 0.0, _dt_ldexp(y, k)))
)py"},
      {"_dt_softplus", {"_dt_exp_parts", "_dt_ldexp", "_dt_log1p"}, R"py(def _dt_softplus(v):
    # torch's softplus: v past 20; below, max(v, 0) + log(1 + e^-|v|), e^-|v| and the log1p
    # accurate, so that a tiny e^v (subnormal too) is the result.
    v = tl.cast(v, tl.float32)
    a = tl.abs(v)
    q, k = _dt_exp_parts(-tl.where(a > 150.0, 150.0, a), 0.0)
    return tl.where(v > 20.0, v, tl.where(v > 0.0, v, 0.0) + _dt_log1p(_dt_ldexp(1.0 + q, k)))
)py"},
      {"_dt_gelu",
       {"_dt_exp_parts", "_dt_ldexp", "_dt_gelu_near", "_dt_erfcx_far", "_dt_div"},
       R"py(def _dt_gelu(v):
    # v Phi(v), Phi(v) = (1 + erf(v / sqrt 2)) / 2, from T = |v| erfc(z) / 2 = |v| Phi(-|v|),
    # z = |v| / sqrt 2: e^(-v^2 / 2) (v^2 exact as in _dt_erfc) times |v| erfcx(z) / 2, erfcx
    # from _dt_gelu_near below z = 2 and erfcx_far(2 / v^2) / sqrt 2 above. gelu(v) = -T for
    # v < 0 and v - T above: no cancellation (T <= v / 2 there), also at 0, where T is v / 2.
    v = tl.cast(v, tl.float32)
    w = tl.abs(v)
    hi = (w.to(tl.int32, bitcast=True) & -4096).to(tl.float32, bitcast=True)
    lo = w - hi
    q, k = _dt_exp_parts(tl.maximum(-0.5 * (hi * hi), -150.0), -0.5 * (lo * (w + hi)))
    p = tl.where(w < 2.828427, 0.5 * w * _dt_gelu_near(w - 1.625),
                 0.70710677 * _dt_erfcx_far(_dt_div(2.0, tl.maximum(w * w, 8.0))))
    tail = _dt_ldexp(p + q * p, k)
    return tl.where(v < 0.0, tl.where(v < -20.0, v * 0.0, tail * -1.0),  # (-x is 0 - x: +0)
                    tl.where(v > 10.0, v, v - tail))
)py"},
      {"_dt_gelu_tanh", {"_dt_exp_parts", "_dt_ldexp", "_dt_div"}, R"py(def _dt_gelu_tanh(v):
    # v (1 + tanh u) / 2 = v / (1 + e^(-2u)), u = sqrt(2/pi) (v + 0.044715 v^3): no
    # cancellation. 2u is computed in float64 and passed to _dt_exp_parts in two parts, since
    # e^(2u) for large |u| needs more bits of it than float32 has; for v < 0, v t / (1 + t)
    # with t = e^(2u), as in _dt_silu.
    v = tl.cast(v, tl.float32)
    x = v.to(tl.float64)
    u2 = -tl.abs(1.5957691216057308 * (x + 0.044715 * x * x * x))
    u2 = tl.where(u2 < -150.0, -150.0, u2)
    hi = u2.to(tl.float32)
    q, k = _dt_exp_parts(hi, (u2 - hi.to(tl.float64)).to(tl.float32))
    y = _dt_div(tl.where(v >= 0.0, v, v * (1.0 + q)), 1.0 + _dt_ldexp(1.0 + q, k))
    return tl.where(v >= 0.0, y, tl.where(v < -20.0, v * 0.0, _dt_ldexp(y, k)))
)py"},
  };
  return helpers;
}

const Helper* find_helper(std::string_view name) {
  for (const Helper& h : helper_table())
    if (name == h.name) return &h;
  return nullptr;
}

} // namespace

std::string helper_source(std::string_view name) {
  const Helper* h = find_helper(name);
  return h ? h->source : std::string();
}

std::vector<std::string> helper_uses(std::string_view name) {
  const Helper* h = find_helper(name);
  return h ? std::vector<std::string>(h->uses.begin(), h->uses.end()) : std::vector<std::string>();
}

const char* triton_function(kir::Intrinsic fn) {
  static const std::pair<kir::Intrinsic, const char*> spellings[] = {
      {kir::Intrinsic::Abs, "tl.abs"},
      {kir::Intrinsic::Ceil, "tl.ceil"},
      {kir::Intrinsic::Floor, "tl.floor"},
      {kir::Intrinsic::Cos, "tl.cos"},
      {kir::Intrinsic::Sin, "tl.sin"},
      {kir::Intrinsic::Erf, "tl.erf"},
      {kir::Intrinsic::Exp, "tl.exp"},
      {kir::Intrinsic::Exp2, "tl.exp2"},
      {kir::Intrinsic::Log, "tl.log"},
      {kir::Intrinsic::Log2, "tl.log2"},
      {kir::Intrinsic::Rsqrt, "tl.rsqrt"},
      {kir::Intrinsic::Sigmoid, "tl.sigmoid"},
      {kir::Intrinsic::Sqrt, "tl.sqrt"},
      {kir::Intrinsic::SqrtRn, "tl.sqrt_rn"},
      {kir::Intrinsic::Fdiv, "tl.fdiv"},
      {kir::Intrinsic::DivRn, "tl.div_rn"},
      {kir::Intrinsic::MulRn, "_dt_mul_rn"}, // mul.rn on the GPU
      {kir::Intrinsic::Fma, "tl.fma"},
      {kir::Intrinsic::Tanh, "_dt_tanh"},
      {kir::Intrinsic::Sinh, "_dt_sinh"},
      {kir::Intrinsic::Cosh, "_dt_cosh"},
      {kir::Intrinsic::Tan, "_dt_tan"},
      {kir::Intrinsic::Pow, "_dt_pow"},
      {kir::Intrinsic::Log1p, "_dt_log1p"},
      {kir::Intrinsic::Expm1, "_dt_expm1"},
      {kir::Intrinsic::Log10, "_dt_log10"},
      {kir::Intrinsic::Erfc, "_dt_erfc"},
      {kir::Intrinsic::Sign, "_dt_sign"},
      {kir::Intrinsic::Silu, "_dt_silu"},
      {kir::Intrinsic::Softplus, "_dt_softplus"},
      {kir::Intrinsic::Gelu, "_dt_gelu"},
      {kir::Intrinsic::GeluTanh, "_dt_gelu_tanh"},
      {kir::Intrinsic::PowHalf, "_dt_pow_half"},
      {kir::Intrinsic::PowFrac, "_dt_pow_frac"},
  };
  for (const auto& [f, text] : spellings)
    if (f == fn) return text;
  throw InternalError(std::string("no Triton spelling of the intrinsic ") + kir::info(fn).name);
}

bool is_helper(kir::Intrinsic fn) {
  return std::string_view(triton_function(fn)).substr(0, 4) == "_dt_";
}

} // namespace dtc
