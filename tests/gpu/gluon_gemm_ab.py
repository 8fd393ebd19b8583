"""GPU benchmark (not a test): can a warp-specialized Hopper GEMM written in Gluon (Triton 3.6's
lower-level language) take the bias + GELU epilogue for free, where the Triton-language kernels
dtc prints cannot (docs/benchmarks.md, Hopper GEMMs)?

The kernel is persistent (one program per multiprocessor, tiles in groups of GROUP_M row blocks)
and warp-specialized: a producer warp streams A's and W's tiles into a ring of STAGES
shared-memory buffers through TMA, and one or two consumers (4 or 8 warps each) multiply them
with wgmma. Two consumers take alternate output tiles and their products take turns (a pair of
barriers): one consumer's product runs while the other applies the epilogue to its finished tile
and stores it, the ping-pong of FlashAttention-3 and CUTLASS's Hopper kernels. The turns are
also what makes the shared ring correct: a consumer that ran ahead to its next tile would wait
on a ring barrier two phases behind, which a parity wait cannot tell from the phase it wants.
The epilogue is dtc's own exact GELU (the `_dt_*` helpers of a module dtc printed, recompiled as
Gluon functions), on the tile in registers, staged through shared memory (gelu_staged), or in
an epilogue partition of 4 or 8 warps of its own to which the consumers hand their float32
tiles through shared memory (a pair of barriers), so that neither consumer's product waits for
the GELU.

Each configuration is first run once in a child process with a time limit (gpu_common.checked:
a kernel whose barriers deadlock must not hang the run) and checked against float32 torch; those that pass are
timed in this process beside cuBLAS's bare product, `addmm` + GELU, torch.compile of the eager
formula and dtc's best kernel of the last lease (do_bench median, and GPU-only through a CUDA
graph).

    python3 tests/gpu/gluon_gemm_ab.py make DIR      (prints dtc's kernel into DIR)
    python3 tests/gpu/gluon_gemm_ab.py compile DIR   (every configuration for sm_90, no GPU)
    python3 tests/gpu/gluon_gemm_ab.py time DIR [--only TEXT] [--shape M,N,K]   (on the GPU)
"""
import json
import os
import subprocess
import sys

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared, mbarrier, tma, warpgroup_mma, warpgroup_mma_wait)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
from triton.language.core import _aggregate as aggregate
from triton.runtime.jit import JITFunction, constexpr_function

from gpu_common import bench_two_ways, checked, dtc, load, pretend_hopper, sm90_summary

DT_BEST = ("out.block(m:128, n:128); out.tensorize(m:0, n:0, k:64); out.map(m:mi/8, n, mi); "
           "mm.fuse_at(out, n); out.tma(A, W); out.persistent(interleaved); out.num_warps(8); "
           "out.num_stages(4)")
SHAPES = [(8192, 4096, 4096), (8192, 16384, 4096), (4096, 4096, 4096)]
# The launcher's arguments; epi 0 the bare product, 1 + bias, 2 + bias and dtc's exact GELU on
# the tile in registers, 3 + bias and the textbook GELU (libdevice's erf), 4 + bias and dtc's GELU
# staged through shared memory (gelu_staged), 5 the same in an epilogue partition of its own that
# the consumers hand their float32 tiles to. A ring of 4 stages of 128x64 + 64x128 (k steps of
# 64) and two 128x128 result buffers fill 192 KiB of shared memory. Consumers of 4 warps hold 128
# accumulators a thread, of 8 warps 64. One consumer of 8 warps on 128x256 tiles: warp
# specialization without the ping-pong (a producer warp beside Triton's usual kernel).
COOPERATIVE = {"consumers": 1, "consumer_warps": 8, "bn": 256, "stages": 3}
CONFIGS = ([{"epi": e} for e in (0, 1, 2, 4, 5)]
           + [{"epi": 5, "epilogue_warps": 8, "epilogue_regs": 64}]
           + [{"epi": e, "consumer_warps": 8} for e in (2, 3, 4)]
           + [dict(COOPERATIVE, epi=e) for e in (0, 1, 4)])
BARE = [{"epi": 0}, dict(COOPERATIVE, epi=0), dict(COOPERATIVE, epi=0, stages=4, tma_store=False)]


@aggregate
class Shared:
    """What the partitions share: the descriptors, the operand ring and its barriers (`ready`:
    a stage filled, `empty`: a stage consumed), the consumers' turns, the result buffers, and
    the hand-off of a finished tile to an epilogue partition (`handoff`: 0 a tile staged, 1 the
    staging read), and the launch's constants (the kernel's parameters of the same names)."""
    a_desc: tma.tensor_descriptor
    b_desc: tma.tensor_descriptor
    c_desc: tma.tensor_descriptor
    a_bufs: gl.shared_memory_descriptor
    b_bufs: gl.shared_memory_descriptor
    c_bufs: gl.shared_memory_descriptor
    ready: gl.shared_memory_descriptor
    empty: gl.shared_memory_descriptor
    turn: gl.shared_memory_descriptor
    handoff: gl.shared_memory_descriptor
    GROUP_M: gl.constexpr
    NUM_SMS: gl.constexpr
    EPI: gl.constexpr
    CONSUMERS: gl.constexpr
    TMA_STORE: gl.constexpr

    @constexpr_function
    def __init__(self, a_desc, b_desc, c_desc, a_bufs, b_bufs, c_bufs, ready, empty, turn,
                 handoff, GROUP_M, NUM_SMS, EPI, CONSUMERS, TMA_STORE):
        self.a_desc, self.b_desc, self.c_desc = a_desc, b_desc, c_desc
        self.a_bufs, self.b_bufs, self.c_bufs = a_bufs, b_bufs, c_bufs
        self.ready, self.empty, self.turn, self.handoff = ready, empty, turn, handoff
        self.GROUP_M, self.NUM_SMS = gl.constexpr(GROUP_M), gl.constexpr(NUM_SMS)
        self.EPI, self.CONSUMERS = gl.constexpr(EPI), gl.constexpr(CONSUMERS)
        self.TMA_STORE = gl.constexpr(TMA_STORE)


def name(config):
    return " ".join(f"{k} {v}" for k, v in config.items())


def make(out_dir):
    """dtc's best Triton-language kernel of the epilogue space, printed into `out_dir`."""
    os.makedirs(out_dir, exist_ok=True)
    dtc("gemm_epilogue", DT_BEST, os.path.join(out_dir, "dt_best.py"))


def kernels(out_dir):
    """The Gluon kernel and its launcher, with dtc's GELU helpers (from `out_dir`/dt_best.py)
    recompiled as Gluon functions."""
    import torch

    dt = load(os.path.join(out_dir, "dt_best.py"), "dt_best_helpers")
    for name, value in list(vars(dt).items()):
        if name.startswith("_dt_") and isinstance(value, JITFunction):
            setattr(dt, name, gluon.jit(value.fn))
    gelu = dt._dt_gelu

    @gluon.jit
    def halves(x):
        """x's first and second halves along its columns."""
        return x.reshape([x.shape[0], 2, x.shape[1] // 2]).permute(0, 2, 1).split()

    @gluon.jit
    def gelu_staged(acc, half, stage, c_ptr, bias_ptr, off_m, off_n, N):
        """The epilogue through shared memory: each half of the float32 tile `acc` [BM, BN] is
        stored to `half` [BM, BN // 2] and read back from `stage`, a view of the same memory as
        [BM // ROWS, ROWS, BN // 2], ROWS rows at a time in a loop, the bias and dtc's GELU
        applied and the result stored: the GELU's code once for ROWS x BN / 2 elements, where
        applied to the tile in registers it is inlined for every element a thread holds (128 at
        4 warps), more code than the instruction cache holds."""
        CHUNKS: gl.constexpr = stage.shape[0]
        ROWS: gl.constexpr = stage.shape[1]
        HALF: gl.constexpr = stage.shape[2]
        blocked: gl.constexpr = gl.BlockedLayout([1, 4], [2, 16], [gl.num_warps(), 1], [1, 0])
        parts = halves(acc)
        for h in gl.static_range(2):
            half.store(parts[h])
            gl.thread_barrier()
            cols = off_n + h * HALF + gl.arange(0, HALF, layout=gl.SliceLayout(0, blocked))
            bias = gl.load(bias_ptr + cols).to(gl.float32)
            for r in range(CHUNKS):
                v = stage.index(r).load(blocked) + bias[None, :]
                rows = off_m + r * ROWS + gl.arange(0, ROWS, layout=gl.SliceLayout(1, blocked))
                gl.store(c_ptr + rows[:, None] * N + cols[None, :],
                         gelu(v).to(c_ptr.dtype.element_ty))
            gl.thread_barrier()

    @gluon.jit
    def tile_of(t, num_pid_m, num_pid_n, GROUP_M: gl.constexpr):
        in_group = GROUP_M * num_pid_n
        first_m = (t // in_group) * GROUP_M
        rows = gl.minimum(num_pid_m - first_m, GROUP_M)
        return first_m + (t % in_group) % rows, (t % in_group) // rows

    @gluon.jit
    def tiles(a_desc, b_desc, M, N, K, NUM_SMS: gl.constexpr):
        """The output tiles along m and n, the k steps, and the count of tiles this program
        takes (tiles pid, pid + NUM_SMS, ...)."""
        num_pid_m = gl.cdiv(M, a_desc.block_type.shape[0])
        num_pid_n = gl.cdiv(N, b_desc.block_type.shape[1])
        mine = gl.cdiv(num_pid_m * num_pid_n - gl.program_id(0), NUM_SMS)
        return num_pid_m, num_pid_n, gl.cdiv(K, a_desc.block_type.shape[1]), mine

    @gluon.jit
    def producer(s, c_ptr, bias_ptr, M, N, K, WHICH: gl.constexpr):
        BM: gl.constexpr = s.a_desc.block_type.shape[0]
        BK: gl.constexpr = s.a_desc.block_type.shape[1]
        BN: gl.constexpr = s.b_desc.block_type.shape[1]
        STAGES: gl.constexpr = s.a_bufs.type.shape[0]
        num_pid_m, num_pid_n, k_tiles, mine = tiles(s.a_desc, s.b_desc, M, N, K, s.NUM_SMS)
        pid = gl.program_id(0)
        for i in range(mine):
            pid_m, pid_n = tile_of(pid + i * s.NUM_SMS, num_pid_m, num_pid_n, s.GROUP_M)
            for kk in range(k_tiles):
                n = i * k_tiles + kk
                bar = s.ready.index(n % STAGES)
                mbarrier.wait(s.empty.index(n % STAGES), ((n // STAGES) & 1) ^ 1)
                mbarrier.expect(bar, s.a_desc.block_type.nbytes + s.b_desc.block_type.nbytes)
                tma.async_copy_global_to_shared(s.a_desc, [pid_m * BM, kk * BK], bar,
                                                s.a_bufs.index(n % STAGES))
                tma.async_copy_global_to_shared(s.b_desc, [kk * BK, pid_n * BN], bar,
                                                s.b_bufs.index(n % STAGES))

    @gluon.jit
    def consumer(s, c_ptr, bias_ptr, M, N, K, WHICH: gl.constexpr):
        BM: gl.constexpr = s.a_desc.block_type.shape[0]
        BN: gl.constexpr = s.b_desc.block_type.shape[1]
        STAGES: gl.constexpr = s.a_bufs.type.shape[0]
        layout: gl.constexpr = gl.NVMMADistributedLayout(
            version=[3, 0], warps_per_cta=[gl.num_warps(), 1], instr_shape=[16, BN, 16])
        # Float32 tiles staged in the result buffers: the swizzle repeats every 8 rows, so views
        # of whole halves or tiles and of chunks of 16 rows address the same memory alike.
        swizzle: gl.constexpr = gl.SwizzledSharedLayout(4, 1, 8, [1, 0])
        c_smem = s.c_bufs.index(WHICH)
        num_pid_m, num_pid_n, k_tiles, mine = tiles(s.a_desc, s.b_desc, M, N, K, s.NUM_SMS)
        pid = gl.program_id(0)
        for i in range(WHICH, mine, s.CONSUMERS):
            pid_m, pid_n = tile_of(pid + i * s.NUM_SMS, num_pid_m, num_pid_n, s.GROUP_M)
            if s.CONSUMERS == 2:
                # The consumers' products take turns (tile i - 1's consumer has waited for all
                # of its operands): the ring's barriers are then never waited on a phase
                # ahead, and one consumer's epilogue runs beside the other's product.
                j = i // 2
                if WHICH == 1:
                    mbarrier.wait(s.turn.index(1), j & 1)
                else:
                    mbarrier.wait(s.turn.index(0), (j - 1) & 1, pred=j > 0)
            acc = gl.zeros([BM, BN], gl.float32, layout)
            n0 = i * k_tiles
            for kk in range(k_tiles):
                n = n0 + kk
                mbarrier.wait(s.ready.index(n % STAGES), (n // STAGES) & 1)
                acc = warpgroup_mma(s.a_bufs.index(n % STAGES), s.b_bufs.index(n % STAGES), acc,
                                    is_async=True)
                acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc, ))
                # The product of the step before has retired: its stage is free.
                mbarrier.arrive(s.empty.index((n + STAGES - 1) % STAGES), count=1, pred=kk > 0)
            if s.CONSUMERS == 2:
                mbarrier.arrive(s.turn.index(1 - WHICH), count=1)
            acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))
            mbarrier.arrive(s.empty.index((n0 + k_tiles - 1) % STAGES), count=1)
            if s.EPI == 5:
                # The tile to the epilogue partition, through both result buffers (a float32
                # tile), once tile i - 1 (the other consumer's) has been staged there and read:
                # without the first wait a consumer could find the barrier of reads two phases
                # behind (tile i - 3 read, i - 2 still being read), which a parity wait takes
                # for the phase it wants.
                mbarrier.wait(s.handoff.index(0), (i - 1) & 1, pred=i > 0)
                mbarrier.wait(s.handoff.index(1), (i & 1) ^ 1)
                s.c_bufs._reinterpret(gl.float32, [BM, BN], swizzle).store(acc)
                gl.thread_barrier()
                mbarrier.arrive(s.handoff.index(0), count=1)
            elif s.EPI == 4:
                gelu_staged(acc, c_smem._reinterpret(gl.float32, [BM, BN // 2], swizzle),
                            c_smem._reinterpret(gl.float32, [BM // 16, 16, BN // 2], swizzle),
                            c_ptr, bias_ptr, pid_m * BM, pid_n * BN, N)
            else:
                if s.EPI >= 1:
                    offs_n = pid_n * BN + gl.arange(0, BN, layout=gl.SliceLayout(0, layout))
                    bias = gl.load(bias_ptr + offs_n).to(gl.float32)
                    acc = acc + bias[None, :]
                if s.EPI == 2:
                    acc = gelu(acc)
                if s.EPI == 3:  # the textbook form, libdevice's erf: shorter code, less accurate
                    acc = 0.5 * acc * (1.0 + gl.erf(acc * 0.7071067811865476))
                if s.TMA_STORE:
                    tma.store_wait(0)
                    c_smem.store(acc.to(s.c_desc.dtype))
                    fence_async_shared()
                    tma.async_copy_shared_to_global(s.c_desc, [pid_m * BM, pid_n * BN], c_smem)
                else:
                    rows = pid_m * BM + gl.arange(0, BM, layout=gl.SliceLayout(1, layout))
                    cols = pid_n * BN + gl.arange(0, BN, layout=gl.SliceLayout(0, layout))
                    gl.store(c_ptr + rows[:, None] * N + cols[None, :], acc.to(s.c_desc.dtype))
        if s.TMA_STORE and s.EPI < 4:
            tma.store_wait(0)

    @gluon.jit
    def epilogue(s, c_ptr, bias_ptr, M, N, K, WHICH: gl.constexpr):
        """The bias and dtc's GELU of every tile the consumers hand over (EPI 5), 16 rows at a
        time, in warps of their own: the consumers' products do not wait for it."""
        BM: gl.constexpr = s.a_desc.block_type.shape[0]
        BN: gl.constexpr = s.b_desc.block_type.shape[1]
        swizzle: gl.constexpr = gl.SwizzledSharedLayout(4, 1, 8, [1, 0])
        blocked: gl.constexpr = gl.BlockedLayout([1, 4], [1, 32], [gl.num_warps(), 1], [1, 0])
        stage = s.c_bufs._reinterpret(gl.float32, [BM // 16, 16, BN], swizzle)
        num_pid_m, num_pid_n, k_tiles, mine = tiles(s.a_desc, s.b_desc, M, N, K, s.NUM_SMS)
        pid = gl.program_id(0)
        for i in range(mine):
            pid_m, pid_n = tile_of(pid + i * s.NUM_SMS, num_pid_m, num_pid_n, s.GROUP_M)
            cols = pid_n * BN + gl.arange(0, BN, layout=gl.SliceLayout(0, blocked))
            bias = gl.load(bias_ptr + cols).to(gl.float32)
            mbarrier.wait(s.handoff.index(0), i & 1)
            for r in range(BM // 16):
                v = stage.index(r).load(blocked) + bias[None, :]
                rows = pid_m * BM + r * 16 + gl.arange(0, 16, layout=gl.SliceLayout(1, blocked))
                gl.store(c_ptr + rows[:, None] * N + cols[None, :],
                         gelu(v).to(c_ptr.dtype.element_ty))
            gl.thread_barrier()
            mbarrier.arrive(s.handoff.index(1), count=1)

    @gluon.jit
    def gemm_ws(a_desc, b_desc, c_desc, c_ptr, bias_ptr, M, N, K, GROUP_M: gl.constexpr,
                NUM_SMS: gl.constexpr, EPI: gl.constexpr, STAGES: gl.constexpr,
                CONSUMERS: gl.constexpr, PRODUCER_WARPS: gl.constexpr, TMA_STORE: gl.constexpr,
                CONSUMER_REGS: gl.constexpr, EPILOGUE_WARPS: gl.constexpr,
                EPILOGUE_REGS: gl.constexpr):
        a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_type.shape,
                                           a_desc.layout)
        b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_type.shape,
                                           b_desc.layout)
        c_bufs = gl.allocate_shared_memory(c_desc.dtype, [CONSUMERS] + c_desc.block_type.shape,
                                           c_desc.layout)
        ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        turn = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
        handoff = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(STAGES):
            mbarrier.init(ready.index(i), count=1)
            mbarrier.init(empty.index(i), count=1)
        for i in gl.static_range(2):
            mbarrier.init(turn.index(i), count=1)
            mbarrier.init(handoff.index(i), count=1)
        s = Shared(a_desc, b_desc, c_desc, a_bufs, b_bufs, c_bufs, ready, empty, turn, handoff,
                   GROUP_M, NUM_SMS, EPI, CONSUMERS, TMA_STORE)
        if EPI == 5:
            gl.warp_specialize([
                (consumer, (s, c_ptr, bias_ptr, M, N, K, 0)),
                (consumer, (s, c_ptr, bias_ptr, M, N, K, 1)),
                (producer, (s, c_ptr, bias_ptr, M, N, K, 0)),
                (epilogue, (s, c_ptr, bias_ptr, M, N, K, 0)),
            ], [gl.num_warps(), PRODUCER_WARPS, EPILOGUE_WARPS],
                [CONSUMER_REGS, 24, EPILOGUE_REGS])
        elif CONSUMERS == 2:
            gl.warp_specialize([
                (consumer, (s, c_ptr, bias_ptr, M, N, K, 0)),
                (consumer, (s, c_ptr, bias_ptr, M, N, K, 1)),
                (producer, (s, c_ptr, bias_ptr, M, N, K, 0)),
            ], [gl.num_warps(), PRODUCER_WARPS], [CONSUMER_REGS, 24])
        else:
            gl.warp_specialize([
                (consumer, (s, c_ptr, bias_ptr, M, N, K, 0)),
                (producer, (s, c_ptr, bias_ptr, M, N, K, 0)),
            ], [PRODUCER_WARPS], [24])

    def launch(A, W, bias, C, epi, bn=128, bk=64, stages=4, group_m=8, consumers=2,
               producer_warps=1, consumer_warps=4, tma_store=True, epilogue_warps=4,
               epilogue_regs=80, consumer_regs=None, maxnreg=None, sms=None,
               compile_only=False):
        """Runs the kernel on A [M, K] and W [K, N] into C through a ring of `stages`
        buffers; with epi 5, an epilogue partition of `epilogue_warps` warps."""
        M, K = A.shape
        N = W.shape[1]
        bm = 128
        assert epi != 5 or (consumers == 2 and bn == 128), "epi 5 stages a tile in both buffers"
        # Registers: the warps of the partitions, each rounded up to a warpgroup, share 64K; the
        # producer's warpgroup keeps 24 a thread, the epilogue's `epilogue_regs`, and the
        # consumers share the rest.
        consumer_groups = consumers * consumer_warps // 4
        epilogue_groups = epilogue_warps // 4 if epi == 5 else 0
        groups = consumer_groups + 1 + epilogue_groups
        maxnreg = maxnreg or (65536 // (128 * groups)) // 8 * 8
        consumer_regs = consumer_regs or min(256, (
            maxnreg * 128 * groups - 24 * 128 - epilogue_regs * 128 * epilogue_groups)
            // (128 * consumer_groups) // 8 * 8)
        assert M % bm == 0 and N % bn == 0 and K % bk == 0
        el = gl.bfloat16 if A.dtype.is_floating_point and A.element_size() == 2 else gl.float16
        a_desc = TensorDescriptor.from_tensor(
            A, [bm, bk], gl.NVMMASharedLayout.get_default_for([bm, bk], el))
        b_desc = TensorDescriptor.from_tensor(
            W, [bk, bn], gl.NVMMASharedLayout.get_default_for([bk, bn], el))
        c_desc = TensorDescriptor.from_tensor(
            C, [bm, bn], gl.NVMMASharedLayout.get_default_for([bm, bn], el))
        sms = sms or torch.cuda.get_device_properties(A.device).multi_processor_count
        grid = (min(sms, (M // bm) * (N // bn)), )
        options = dict(GROUP_M=group_m, NUM_SMS=sms, EPI=epi, STAGES=stages,
                       CONSUMERS=consumers, PRODUCER_WARPS=producer_warps, TMA_STORE=tma_store,
                       CONSUMER_REGS=consumer_regs, EPILOGUE_WARPS=epilogue_warps,
                       EPILOGUE_REGS=epilogue_regs, num_warps=consumer_warps)
        if maxnreg:
            options["maxnreg"] = maxnreg
        args = (a_desc, b_desc, c_desc, C, bias, M, N, K)
        if compile_only:
            return gemm_ws.warmup(*args, grid=grid, **options)
        gemm_ws[grid](*args, **options)
        return C

    return launch


def make_inputs(m, n, k):
    import torch
    g = torch.Generator(device="cuda").manual_seed(0)
    A = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=g)
    W = (torch.randn(k, n, device="cuda", dtype=torch.bfloat16, generator=g) / 64)
    bias = torch.randn(n, device="cuda", dtype=torch.bfloat16, generator=g)
    return A, W, bias


def reference(A, W, bias, epi):
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    y = A.float() @ W.float()
    if epi >= 1:
        y = y + bias.float()
    if epi >= 2:  # 3: a GELU of another form; 4 and 5: dtc's, staged
        y = torch.nn.functional.gelu(y)
    return y


def error(got, want):
    """Relative L2 error, and the count of values not written (NaN where the output began NaN)."""
    import torch
    g = got.float()
    return (float(torch.linalg.vector_norm(g - want) / torch.linalg.vector_norm(want)),
            int(torch.isnan(g).sum()))


def check_each(configs, report, out_dir, shape):
    """Runs each configuration once and reports its error (in a child process: checked)."""
    import torch
    launch = kernels(out_dir)
    A, W, bias = make_inputs(*shape)
    want = {epi: reference(A, W, bias, epi) for epi in {c["epi"] for c in configs}}
    for config in configs:
        with report(config):
            C = torch.full((shape[0], shape[1]), float("nan"), device="cuda",
                           dtype=torch.bfloat16)
            launch(A, W, bias, C, **config)
            torch.cuda.synchronize()
            report.result = error(C, want[config["epi"]])


VARIANTS = [{}, {"tma_store": False}, {"consumers": 1, "stages": 4}, {"producer_warps": 4}]


def debug(out_dir):
    """Each variant of the kernel (VARIANTS) at small shapes, each in a process of its own with
    CUDA_LAUNCH_BLOCKING=1: which of its parts makes it fail."""
    env = dict(os.environ, CUDA_LAUNCH_BLOCKING="1")
    for shape in [(256, 256, 128), (4096, 4096, 512)]:
        for variant in VARIANTS:
            try:
                r = subprocess.run([sys.executable, __file__, "one", out_dir,
                                    json.dumps([shape, variant])], env=env, capture_output=True,
                                   text=True, timeout=60)
                out = (r.stdout.strip().splitlines() or ["(nothing)"])[-1]
                err = [line for line in r.stderr.splitlines() if "Error" in line][-1:]
                print(f"{shape} {variant}: rc {r.returncode} {out} {' '.join(err)[:300]}",
                      flush=True)
            except subprocess.TimeoutExpired:
                print(f"{shape} {variant}: hung (60 s)", flush=True)


def one(out_dir, spec):
    import torch
    shape, variant = json.loads(spec)
    launch = kernels(out_dir)
    A, W, bias = make_inputs(*shape)
    C = torch.full((shape[0], shape[1]), float("nan"), device="cuda", dtype=torch.bfloat16)
    launch(A, W, bias, C, 2, **variant)
    torch.cuda.synchronize()
    print("error", error(C, reference(A, W, bias, 2)))


def time_all(out_dir, only=None, shapes=None):
    """Checks and times the configurations (those whose name contains `only`) at `shapes`
    (default SHAPES) beside the peers."""
    import torch

    def bench(fn):
        return bench_two_ways(fn, calls=20, warmup=100, rep=500)

    launch = kernels(out_dir)
    dt = load(os.path.join(out_dir, "dt_best.py"), "dt_best")
    compiled = torch.compile(lambda a, w, b: torch.nn.functional.gelu(a @ w + b))
    for shape in shapes or SHAPES:
        m, n, k = shape
        A, W, bias = make_inputs(m, n, k)
        flop = 2 * m * n * k
        rows = []
        ok = {}
        configs = [c for c in (BARE if m == n == k else CONFIGS) if only is None or only in name(c)]
        for config, (status, detail) in checked(check_each, configs, out_dir, shape):
            good = status == "ok" and detail[1] == 0 and detail[0] < 2e-2
            print(f"{shape} {name(config)}: {status} {detail}{'' if good else '  (left out)'}",
                  flush=True)
            if good:
                ok[name(config)] = config
        want = reference(A, W, bias, 2)
        dt_out_ = getattr(dt, dt.PYTHON_NAMES["out"])
        dt_out = dt_out_(A, W, bias)
        print(f"{shape} dtc's kernel: error {error(dt_out, want)}", flush=True)
        peers = {
            "cuBLAS A @ W": lambda: A @ W,
            "addmm + gelu": lambda: torch.nn.functional.gelu(torch.addmm(bias, A, W)),
            "torch.compile": lambda: compiled(A, W, bias),
            "dtc best (Triton)": lambda: dt_out_(A, W, bias),
        }
        for label, fn in peers.items():
            rows.append((label, *bench(fn)))
        C = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        for label, config in ok.items():
            rows.append((f"gluon {label}", *bench(lambda: launch(A, W, bias, C, **config))))
        bare = rows[0][1]
        print(f"\n{shape}: do_bench ms, GPU-only ms, TFLOP/s, / cuBLAS's bare product")
        for label, ms, gpu in rows:
            print(f"  {label:36s} {ms:8.4f} {gpu:8.4f} {flop / ms / 1e9:7.1f} {ms / bare:6.3f}",
                  flush=True)
        print(json.dumps({"shape": shape, "rows": rows}), flush=True)


def compile_all(out_dir):
    """Each configuration compiled for sm_90 without a GPU: shared memory, registers, spills."""
    import torch
    pretend_hopper()
    launch = kernels(out_dir)
    m, n, k = SHAPES[0]
    A, W = torch.empty(m, k, dtype=torch.bfloat16), torch.empty(k, n, dtype=torch.bfloat16)
    bias, C = torch.empty(n, dtype=torch.bfloat16), torch.empty(m, n, dtype=torch.bfloat16)
    for config in CONFIGS:
        compiled = launch(A, W, bias, C, **config, sms=132, compile_only=True)
        print(f"{name(config)}: {sm90_summary(compiled)}", flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["one"]:
        one(*sys.argv[2:])
        sys.exit(0)
    import argparse
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=["make", "compile", "time", "debug"])
    parser.add_argument("dir")
    parser.add_argument("--only", help="time the configurations whose name contains this")
    parser.add_argument("--shape", action="append", help="M,N,K (repeatable; default SHAPES)")
    a = parser.parse_args()
    if a.step == "time":
        time_all(a.dir, a.only, [tuple(map(int, s.split(","))) for s in a.shape or []])
    else:
        {"make": make, "compile": compile_all, "debug": debug}[a.step](a.dir)
