"""GPU benchmark (not a test): FlashAttention's forward pass (bf16, causal and not) written in
Gluon as FlashAttention-3 runs it on Hopper, against torch's scaled_dot_product_attention
(default backend and forced FLASH_ATTENTION) and flash_probe.py's lean Triton kernel: does warp
specialization, which Triton 3.6's `tl.range(..., warp_specialize=True)` gets wrong on Hopper
(flash_ws_ab.py), reach SDPA's default at d = 128 when written out?

Each program takes 2 x BMC query rows of one (batch, head): a producer warp loads both query
tiles once and streams the key and value tiles into a ring of STAGES buffers through TMA (a
barrier each for the keys and the values, so that a consumer's Q·Kᵀ starts before the values
arrive); two consumer warpgroups of 4 warps take BMC rows each. With PINGPONG (FlashAttention-3's
two overlaps) a consumer issues its step's Q·Kᵀ and the previous step's P·V together and then
hands the tensor cores to the other consumer (a pair of turn barriers) while it computes its
softmax; without it each consumer runs its steps in order (Q·Kᵀ, softmax, P·V) and the two only
share the tensor cores as the warp schedulers interleave them. Causal: each program reads the
key blocks up to its last query row, masks those that reach past a consumer's first row, and
the programs of the most rows start first (across all heads).

Each configuration is first run once in a child process with a time limit (gpu_common.checked)
and checked against SDPA (relative L2 error below 2e-2, every row written), then timed in this
process beside the peers (do_bench median, TFLOP/s).

    python3 tests/gpu/gluon_flash_ab.py compile      (every configuration for sm_90, no GPU)
    python3 tests/gpu/gluon_flash_ab.py time [--only TEXT]   (on the GPU)
"""
import argparse
import math

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    mbarrier, tma, warpgroup_mma, warpgroup_mma_wait)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from gpu_common import checked, pretend_hopper, sm90_summary

SHAPES = [(4, 16, 4096, 128), (16, 16, 1024, 128), (4, 32, 4096, 64)]  # b, h, s, d
# With the ping-pong a consumer holds two stages at once (K_j and V_{j-1}): only a third lets the
# producer load ahead. At d = 128, 128-row key blocks in 3 stages take 229 680 B of the 232 448.
CONFIGS = [{"pingpong": p, "bn": bn, "stages": st} for p in (True, False)
           for bn, st in ((64, 2), (64, 3), (64, 4), (128, 2), (128, 3))]


@gluon.jit
def _rows(N, BMC: gl.constexpr, BN: gl.constexpr, CAUSAL: gl.constexpr):
    """This program's (batch, head), its first query row within it and its count of key
    blocks: all of them, or with CAUSAL those up to its last row. The grid's first axis, which
    the GPU starts fastest, is the query blocks (the programs of one head, which read the same
    keys, run together), or with CAUSAL the heads, the query blocks of most rows first (they
    take longest)."""
    if CAUSAL:
        bh = gl.program_id(0)
        m0 = (gl.num_programs(1) - 1 - gl.program_id(1)) * 2 * BMC
        steps = (m0 + 2 * BMC) // BN
    else:
        bh = gl.program_id(1)
        m0 = gl.program_id(0) * 2 * BMC
        steps = N // BN
    return bh, m0, steps


@gluon.jit
def _masked(qk, j, first_row, BN: gl.constexpr, CAUSAL: gl.constexpr):
    """qk with the keys after each query row at -inf, on the blocks that reach past the first
    of this consumer's rows (CAUSAL)."""
    if CAUSAL:
        if (j + 1) * BN > first_row:
            layout: gl.constexpr = qk.type.layout
            rows = first_row + gl.arange(0, qk.shape[0], layout=gl.SliceLayout(1, layout))
            cols = j * BN + gl.arange(0, BN, layout=gl.SliceLayout(0, layout))
            qk = gl.where(rows[:, None] >= cols[None, :], qk, float("-inf"))
    return qk


@gluon.jit
def _producer(q_desc, k_desc, v_desc, o_ptr, q_smem, k_smem, v_smem, q_bar, k_ready, v_ready,
              kv_empty, turn, N, qk_scale, WHICH: gl.constexpr, PINGPONG: gl.constexpr,
              CAUSAL: gl.constexpr):
    BMC: gl.constexpr = q_desc.block_type.shape[0]
    BN: gl.constexpr = k_desc.block_type.shape[0]
    STAGES: gl.constexpr = k_smem.type.shape[0]
    bh, m0, steps = _rows(N, BMC, BN, CAUSAL)
    row0 = bh * N  # this (batch, head)'s first row of the [b * h * s, d] views
    q_row = row0 + m0
    mbarrier.expect(q_bar, 2 * q_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(q_desc, [q_row, 0], q_bar, q_smem.index(0))
    tma.async_copy_global_to_shared(q_desc, [q_row + BMC, 0], q_bar, q_smem.index(1))
    for j in range(steps):
        s = j % STAGES
        mbarrier.wait(kv_empty.index(s), ((j // STAGES) & 1) ^ 1)
        mbarrier.expect(k_ready.index(s), k_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(k_desc, [row0 + j * BN, 0], k_ready.index(s),
                                        k_smem.index(s))
        mbarrier.expect(v_ready.index(s), v_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(v_desc, [row0 + j * BN, 0], v_ready.index(s),
                                        v_smem.index(s))


@gluon.jit
def _consumer(q_desc, k_desc, v_desc, o_ptr, q_smem, k_smem, v_smem, q_bar, k_ready, v_ready,
              kv_empty, turn, N, qk_scale, WHICH: gl.constexpr, PINGPONG: gl.constexpr,
              CAUSAL: gl.constexpr):
    BMC: gl.constexpr = q_desc.block_type.shape[0]
    D: gl.constexpr = q_desc.block_type.shape[1]
    BN: gl.constexpr = k_desc.block_type.shape[0]
    STAGES: gl.constexpr = k_smem.type.shape[0]
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BN, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, D, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    rows_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    rows_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    q = q_smem.index(WHICH)
    m_i = gl.full([BMC], float("-inf"), gl.float32, rows_s)
    l_i = gl.full([BMC], 0.0, gl.float32, rows_s)
    acc = gl.zeros([BMC, D], gl.float32, o_layout)
    zero_s = gl.zeros([BMC, BN], gl.float32, s_layout)
    mbarrier.wait(q_bar, 0)
    bh, m0, steps = _rows(N, BMC, BN, CAUSAL)
    first_row = m0 + WHICH * BMC
    if PINGPONG:
        # Step j: [my turn] Q·K_jᵀ and P_{j-1}·V_{j-1} issued together, [the other's turn], the
        # softmax of step j while the tensor cores run the other consumer's products, then the
        # rescale of the accumulator once P_{j-1}·V_{j-1} is in it. Step 0 has no P·V.
        mbarrier.wait(turn.index(1), 0, pred=WHICH == 1)
        mbarrier.wait(k_ready.index(0), 0)
        qk = warpgroup_mma(q, k_smem.index(0).permute((1, 0)), zero_s, use_acc=False,
                           is_async=True)
        mbarrier.arrive(turn.index(1 - WHICH), count=1)
        qk = _masked(warpgroup_mma_wait(num_outstanding=0, deps=(qk, )), 0, first_row, BN,
                     CAUSAL)
        m_i = gl.max(qk, 1) * qk_scale
        e = gl.exp2(qk * qk_scale - m_i[:, None])
        l_i = gl.sum(e, 1)
        p = gl.convert_layout(e.to(gl.bfloat16), p_layout)
        for j in range(1, steps):
            s = j % STAGES
            sp = (j - 1) % STAGES
            if WHICH == 1:
                mbarrier.wait(turn.index(1), j & 1)
            else:
                mbarrier.wait(turn.index(0), (j - 1) & 1)
            mbarrier.wait(k_ready.index(s), (j // STAGES) & 1)
            qk = warpgroup_mma(q, k_smem.index(s).permute((1, 0)), zero_s, use_acc=False,
                               is_async=True)
            mbarrier.wait(v_ready.index(sp), ((j - 1) // STAGES) & 1)
            acc = warpgroup_mma(p, v_smem.index(sp), acc, is_async=True)
            mbarrier.arrive(turn.index(1 - WHICH), count=1)
            # The older of the two products, Q·K_jᵀ, done; P_{j-1}·V_{j-1} may still run.
            qk = _masked(warpgroup_mma_wait(num_outstanding=1, deps=(qk, )), j, first_row, BN,
                         CAUSAL)
            m_ij = gl.maximum(m_i, gl.max(qk, 1) * qk_scale)
            e = gl.exp2(qk * qk_scale - m_ij[:, None])
            alpha = gl.exp2(m_i - m_ij)
            l_i = l_i * alpha + gl.sum(e, 1)
            m_i = m_ij
            acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))
            mbarrier.arrive(kv_empty.index(sp), count=1)
            acc = acc * gl.convert_layout(alpha, rows_o)[:, None]
            p = gl.convert_layout(e.to(gl.bfloat16), p_layout)
        last = (steps - 1) % STAGES
        mbarrier.wait(v_ready.index(last), ((steps - 1) // STAGES) & 1)
        acc = warpgroup_mma(p, v_smem.index(last), acc, is_async=True)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))
        mbarrier.arrive(kv_empty.index(last), count=1)
    else:
        for j in range(steps):
            s = j % STAGES
            mbarrier.wait(k_ready.index(s), (j // STAGES) & 1)
            qk = warpgroup_mma(q, k_smem.index(s).permute((1, 0)), zero_s, use_acc=False,
                               is_async=True)
            qk = _masked(warpgroup_mma_wait(num_outstanding=0, deps=(qk, )), j, first_row, BN,
                         CAUSAL)
            m_ij = gl.maximum(m_i, gl.max(qk, 1) * qk_scale)
            e = gl.exp2(qk * qk_scale - m_ij[:, None])
            alpha = gl.exp2(m_i - m_ij)
            l_i = l_i * alpha + gl.sum(e, 1)
            m_i = m_ij
            acc = acc * gl.convert_layout(alpha, rows_o)[:, None]
            p = gl.convert_layout(e.to(gl.bfloat16), p_layout)
            mbarrier.wait(v_ready.index(s), (j // STAGES) & 1)
            acc = warpgroup_mma(p, v_smem.index(s), acc, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))
            mbarrier.arrive(kv_empty.index(s), count=1)
    acc = acc / gl.convert_layout(l_i, rows_o)[:, None]
    rows = bh * N + first_row + gl.arange(0, BMC, layout=rows_o)
    cols = gl.arange(0, D, layout=gl.SliceLayout(0, o_layout))
    gl.store(o_ptr + rows[:, None] * D + cols[None, :], acc.to(gl.bfloat16))


@gluon.jit
def _attention(q_desc, k_desc, v_desc, o_ptr, N, qk_scale, STAGES: gl.constexpr,
               PINGPONG: gl.constexpr, CAUSAL: gl.constexpr, CONSUMER_REGS: gl.constexpr):
    q_smem = gl.allocate_shared_memory(q_desc.dtype, [2] + q_desc.block_type.shape, q_desc.layout)
    k_smem = gl.allocate_shared_memory(k_desc.dtype, [STAGES] + k_desc.block_type.shape,
                                       k_desc.layout)
    v_smem = gl.allocate_shared_memory(v_desc.dtype, [STAGES] + v_desc.block_type.shape,
                                       v_desc.layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    kv_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    turn = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    mbarrier.init(q_bar, count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(kv_empty.index(i), count=2)  # both consumers read every stage
    for i in gl.static_range(2):
        mbarrier.init(turn.index(i), count=1)
    gl.warp_specialize([
        (_consumer, (q_desc, k_desc, v_desc, o_ptr, q_smem, k_smem, v_smem, q_bar, k_ready,
                     v_ready, kv_empty, turn, N, qk_scale, 0, PINGPONG, CAUSAL)),
        (_consumer, (q_desc, k_desc, v_desc, o_ptr, q_smem, k_smem, v_smem, q_bar, k_ready,
                     v_ready, kv_empty, turn, N, qk_scale, 1, PINGPONG, CAUSAL)),
        (_producer, (q_desc, k_desc, v_desc, o_ptr, q_smem, k_smem, v_smem, q_bar, k_ready,
                     v_ready, kv_empty, turn, N, qk_scale, 0, PINGPONG, CAUSAL)),
    ], [4, 1], [CONSUMER_REGS, 24])


def attention(q, k, v, o, causal=False, pingpong=True, bn=128, stages=2, bmc=64,
              compile_only=False):
    """o = softmax(q kᵀ / sqrt(d) + mask) v for contiguous [b, h, s, d] bf16 tensors, s a
    multiple of 2 * bmc and of bn; the mask -inf above the diagonal with `causal`."""
    b, h, n, d = q.shape
    assert n % (2 * bmc) == 0 and n % bn == 0
    layout = gl.NVMMASharedLayout.get_default_for
    q_desc = TensorDescriptor.from_tensor(q.view(b * h * n, d), [bmc, d],
                                          layout([bmc, d], gl.bfloat16))
    k_desc = TensorDescriptor.from_tensor(k.view(b * h * n, d), [bn, d],
                                          layout([bn, d], gl.bfloat16))
    v_desc = TensorDescriptor.from_tensor(v.view(b * h * n, d), [bn, d],
                                          layout([bn, d], gl.bfloat16))
    grid = (b * h, n // (2 * bmc)) if causal else (n // (2 * bmc), b * h)
    # 12 warps (two consumer warpgroups and the producer's) share 64K registers: 168 each at
    # launch, then 24 for the producer's warpgroup and 240 for each consumer's.
    args = (q_desc, k_desc, v_desc, o, n, 1.4426950408889634 / math.sqrt(d))
    options = dict(STAGES=stages, PINGPONG=pingpong, CAUSAL=causal, CONSUMER_REGS=240,
                   num_warps=4, maxnreg=168)
    if compile_only:
        return _attention.warmup(*args, grid=grid, **options)
    _attention[grid](*args, **options)
    return o


def name(config):
    return " ".join(f"{k} {v}" for k, v in config.items())


def check_each(configs, report, shape, causal):
    """Runs each configuration once against SDPA (in a child process: checked)."""
    import torch
    import torch.nn.functional as F
    from flash_probe import inputs
    q, k, v = inputs(shape)
    want = F.scaled_dot_product_attention(q, k, v, is_causal=causal).float()
    for config in configs:
        with report(config):
            o = torch.full_like(q, float("nan"))
            attention(q, k, v, o, causal, **config)
            torch.cuda.synchronize()
            got = o.float()
            report.result = (int(torch.isnan(got).any(dim=-1).sum()),
                             float((torch.nan_to_num(got) - want).norm() / want.norm()))


def time_all(only):
    import torch
    import torch.nn.functional as F
    import triton
    import triton.testing
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from flash_probe import inputs, lean

    def ms(fn):
        fn()
        torch.cuda.synchronize()
        return triton.testing.do_bench(fn, warmup=25, rep=200)

    def flash(q, k, v, causal):
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}",
          flush=True)
    configs = [c for c in CONFIGS if only is None or only in name(c)]
    for shape in SHAPES:
        for causal in (False, True):
            b, h, n, d = shape
            flop = 4 * b * h * n * n * d // (2 if causal else 1)
            ok = []
            for config, (status, detail) in checked(check_each, configs, shape, causal):
                good = status == "ok" and detail[0] == 0 and detail[1] < 2e-2
                print(f"{shape} causal {causal} {name(config)}: {status} {detail}"
                      f"{'' if good else '  (left out)'}", flush=True)
                if good:
                    ok.append(config)
            q, k, v = inputs(shape)
            o = torch.empty_like(q)
            rows = [("sdpa (default)",
                     ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))),
                    ("sdpa FLASH_ATTENTION", ms(lambda: flash(q, k, v, causal))),
                    ("lean Triton (bm 128, bn 64, 8 warps, 3 stages)",
                     ms(lambda: lean(q, k, v, causal, 128, 64, 8, 3)))]
            rows += [(f"gluon {name(c)}", ms(lambda: attention(q, k, v, o, causal, **c)))
                     for c in ok]
            print(f"\nb{b} h{h} s{n} d{d}{' causal' if causal else ''}: ms, TFLOP/s, "
                  "/ SDPA's default")
            for label, t in rows:
                print(f"  {label:48s} {t:8.4f} {flop / t / 1e9:6.0f} {t / rows[0][1]:6.3f}",
                      flush=True)
            torch.cuda.empty_cache()


def compile_all():
    """Each configuration compiled for sm_90 without a GPU: shared memory, registers, spills."""
    import torch
    pretend_hopper()
    for d in sorted({shape[3] for shape in SHAPES}):  # the kernel depends on d alone
        q, k, v, o = (torch.empty(1, 1, 1024, d, dtype=torch.bfloat16) for _ in range(4))
        for config in [dict(c, causal=causal) for causal in (False, True) for c in CONFIGS]:
            compiled = attention(q, k, v, o, **config, compile_only=True)
            print(f"d {d} {name(config)}: {sm90_summary(compiled)}", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=["compile", "time"])
    parser.add_argument("--only", help="time the configurations whose name contains this")
    a = parser.parse_args()
    if a.step == "compile":
        compile_all()
    else:
        time_all(a.only)
