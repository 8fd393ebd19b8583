"""The runtime every generated module carries: argument checks, size inference, output
allocation, views and helpers of the reference. The compiler embeds what follows the marker line
(compiler/CMakeLists.txt) and prints it into each module after the module's imports, which the
lines above the marker repeat so that this file imports, lints and is tested on its own
(tests/test_runtime.py)."""
import math
import numbers
import os

import torch
import triton
import triton.language as tl

# A module defines this at its end, from the same file.
with open(os.path.join(os.path.dirname(__file__), "dt_launch.c")) as _source:
    _DT_LAUNCH_C = _source.read()

# A module defines these before the runtime: its schedule, its compiled Funcs, their Python names,
# renamed compiled Funcs' DT names -> Python names.
SCHEDULE = ""
COMPILED = ()
PYTHON_NAMES = {}
_DT_ALIASES = {}

# --- embedded below ---

_DT_INTEGER_DTYPES = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)


def _dt_check_tensor(name, value, rank, integer=False):
    if not isinstance(value, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if value.is_meta:  # no data: Triton would fail reading it
        raise ValueError(f"{name} is on the meta device, which holds no data; pass a tensor on "
                         "a GPU (or on the CPU under TRITON_INTERPRET=1)")
    if value.dim() != rank:
        raise ValueError(f"{name} must have {rank} dimension(s), got shape {tuple(value.shape)}")
    if integer and value.dtype not in _DT_INTEGER_DTYPES:
        raise ValueError(f"{name} holds whole numbers: it must be int64, int32, int16, int8 or "
                         f"uint8, got {value.dtype}")
    if not integer and value.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ValueError(f"{name} must be float32, float16 or bfloat16, got {value.dtype}")
    if value.is_neg():  # its memory holds the negated values: a kernel would read those
        raise ValueError(f"{name} is a negative view (torch._neg_view); pass "
                         f"{name}.resolve_neg()")


def _dt_scalar(name, value):
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number, got {type(value).__name__}")
    return float(value)


def _dt_int_scalar(name, value):
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be a whole number (int), got {type(value).__name__}")
    value = int(value)
    if not -2**63 <= value < 2**63:
        raise ValueError(f"{name} must fit in int64, got {value}")
    return value


def _dt_dim(labels, given, uses, why=None):
    """The one size of dimension labels `labels`: a label alone, or labels whose sizes are tied
    because the program reads a Func with them (`why` says where). `given` are the sizes passed
    for them (None where not); `uses` are the (label, tensor name, tensor, axis) they index."""
    size = origin = named = None

    def agree(label, value, where, given):
        nonlocal size, origin, named
        if size is None:
            size, origin, named = value, where, label if given else None
        elif value != size:
            tie = f" ({why})" if why else ""
            raise ValueError(f"size of {named or label} disagrees: {where} is {value} but "
                             f"{origin} is {size}{tie}")

    for label, value in zip(labels, given):
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{label} must be a non-negative integer, got {value!r}")
        agree(label, value, f"{label}={value}", True)
    for label, name, tensor, axis in uses:
        agree(label, tensor.shape[axis], f"{name}.shape[{axis}]", False)
    if size is None:
        raise ValueError(f"the size of {labels[0]} cannot be inferred from the inputs; "
                         f"pass {labels[0]}=...")
    return size


def _dt_dtype_device(tensors, index_tensors=()):
    """The inputs' common dtype and device (float32 on the default device without inputs).
    `index_tensors` (integer inputs) share the device, not the dtype."""
    if not tensors:
        device = index_tensors[0][1].device if index_tensors else \
            torch.device("cuda" if torch.cuda.is_available() else "cpu")
        for name, tensor in index_tensors:
            if tensor.device != device:
                raise ValueError(f"{name} is on {tensor.device} but {index_tensors[0][0]} is on "
                                 f"{device}; all input tensors must be on one device")
        return torch.float32, device
    first_name, first = tensors[0]
    for name, tensor in index_tensors:
        if tensor.device != first.device:
            raise ValueError(f"{name} is on {tensor.device} but {first_name} is on {first.device}; "
                             "all input tensors must be on one device")
    for name, tensor in tensors[1:]:
        if tensor.dtype != first.dtype:
            raise ValueError(f"{name} is {tensor.dtype} but {first_name} is {first.dtype}; "
                             "all input tensors must have one dtype")
        if tensor.device != first.device:
            raise ValueError(f"{name} is on {tensor.device} but {first_name} is on {first.device}; "
                             "all input tensors must be on one device")
    return first.dtype, first.device


def _dt_span(tensor):
    """The bytes [first, end) that a tensor's elements lie in (strides are not negative)."""
    first = tensor.data_ptr()
    if tensor.numel() == 0:
        return first, first
    last = sum((n - 1) * s for n, s in zip(tensor.shape, tensor.stride()))
    return first, first + (last + 1) * tensor.element_size()


def _dt_shares(out, tensors):
    """Whether `out`'s memory overlaps that of one of `tensors`, by address range: views of one
    storage, and memory reached through another storage object (DLPack, NumPy) alike."""
    low, high = _dt_span(out)
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.device == out.device:
            first, end = _dt_span(t)
            if first < high and low < end:
                return True
    return False


def _dt_out(out, shape, dtype, device, inputs=()):
    """The tensor the kernels write: `out` when the caller gives one (checked), else a new one.
    When `out` shares memory with one of the `inputs` it is a new one too: a kernel could
    overwrite an element of an input before it reads it (a transposed read, a reduction); the
    wrapper then copies the result into `out`. A new tensor is allocated as the wrapper's later
    calls allocate it: with the first input's new_empty, which gives the inputs' dtype and device
    (and keeps a tensor subclass of the input, as later calls do)."""
    if out is None:
        return _dt_new(shape, dtype, device, inputs)
    if not isinstance(out, torch.Tensor):
        raise ValueError(f"out must be a torch.Tensor, got {type(out).__name__}")
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"out has shape {tuple(out.shape)} but the result has shape {tuple(shape)}")
    if out.dtype != dtype:
        raise ValueError(f"out is {out.dtype} but the result is {dtype} (the inputs' dtype)")
    if out.device.type != device.type or (device.index is not None and out.device != device):
        raise ValueError(f"out is on {out.device} but the inputs are on {device}")
    if out.is_neg():  # torch would read back the negation of what the kernel writes
        raise ValueError("out is a negative view (torch._neg_view); pass a plain tensor")
    extent = 1
    for stride, size in sorted((s, n) for s, n in zip(out.stride(), out.shape) if n > 1):
        if stride < extent:
            raise ValueError("out has elements that share memory (an expanded or overlapping "
                             "view); pass a tensor whose elements are distinct")
        extent = stride * size
    if out.numel() and _dt_shares(out, inputs):
        return _dt_new(shape, dtype, device, inputs)
    return out


def _dt_outs(out, names):
    """`out` of a wrapper that returns several results (`names`): None, or a tuple or list with
    one tensor (or None) per result. The first, and the others (None when none is given)."""
    if out is None:
        return None, None
    if not isinstance(out, (tuple, list)) or len(out) != len(names):
        raise ValueError(f"out must be None or a tuple of {len(names)} tensors (or None), one per "
                         f"result ({', '.join(names)}), got {type(out).__name__}")
    given = [(name, o) for name, o in zip(names, out) if isinstance(o, torch.Tensor) and o.numel()]
    for i, (a, ta) in enumerate(given):
        for b, tb in given[i + 1:]:
            if ta.device == tb.device and _dt_shares(ta, [tb]):
                raise ValueError(f"out gives {a} and {b} tensors that share memory; each result "
                                 "needs memory of its own")
    rest = tuple(out[1:])
    return out[0], (rest if any(o is not None for o in rest) else None)


def _dt_returned(result, outs, i):
    """Result `i` after the first as returned: in the tensor given for it, if any."""
    given = None if outs is None else outs[i]
    return result if given is None or given is result else given.copy_(result)


def _dt_copy_into(outputs, results):
    return tuple(o.copy_(r) for o, r in zip(outputs, results))


def _dt_new(shape, dtype, device, inputs):
    if inputs and inputs[0].is_floating_point():
        return inputs[0].new_empty(shape)
    return torch.empty(shape, dtype=dtype, device=device)


# The kernels index in int32 where every index of a call fits: 32-bit address arithmetic is about
# half the instructions of 64-bit, which matters most in a matmul's inner loop. An index runs
# past its dimension's size by at most the kernel's slack (the last tile's masked lanes, the
# program instances of a map split past the last block), and a tensor may be copied contiguous
# (a tl.dot operand laid out k-contiguous): the bound below covers both.

_DT_INDEX32_LIMIT = 2**31 - 1


def _dt_index_type(slack, tensors, shapes):
    """tl.int32 when no index into `tensors` (as they are, or contiguous) or into new contiguous
    tensors of `shapes` can exceed int32, else tl.int64."""
    layouts = []
    for tensor in tensors:
        layouts.append((tensor.shape, tensor.stride()))
        layouts.append((tensor.shape, None))
    layouts.extend((shape, None) for shape in shapes)
    for shape, strides in layouts:
        if strides is None:  # contiguous
            strides, step = [], 1
            for size in reversed(shape):
                strides.append(step)
                step *= size
            strides.reverse()
        span = 0
        for size, stride in zip(shape, strides):
            span += (2 * size + slack) * max(abs(stride), 1)
        if span > _DT_INDEX32_LIMIT:
            return tl.int64
    return tl.int32


_DT_MAX_NUMEL = 2**20  # Triton's limit on one tensor's elements


def _dt_check_numel(func, shapes):
    """Refuses a call for which a kernel of `func` would compute a tensor of more elements than
    Triton allows: the sizes decide it where a tile is as wide as a whole dimension."""
    for shape in shapes:
        numel = math.prod(shape)
        if numel > _DT_MAX_NUMEL:
            raise ValueError(
                f"{func}: at these sizes its kernel would compute a tensor of {numel} elements "
                f"({' x '.join(map(str, shape))}), more than the {_DT_MAX_NUMEL} Triton allows; "
                "tensorize fewer labels whole, or give them tensor or block sizes")


def _dt_check_launch(device):
    if device.type == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        raise ValueError("the inputs are on the CPU: Triton kernels run on a GPU "
                         "(or set TRITON_INTERPRET=1 to run them in the Triton interpreter)")


def _dt_interpreter_bfloat16_dot():
    """Triton 3.6's interpreter keeps bfloat16 tiles as uint16 and multiplies them in tl.dot as
    those integers: every bfloat16 product computed on the CPU would be wrong (and every schedule
    of a bfloat16 GEMM found incorrect). Under TRITON_INTERPRET=1 its tl.dot takes bfloat16
    operands in float32 instead, as the tensor cores do (a product of two bfloat16 values is
    exact in float32). Once per process; nothing changes on a GPU."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        return
    import numpy
    from triton.runtime import interpreter
    builder = interpreter.InterpreterBuilder
    if getattr(builder.create_dot, "_dt_bfloat16", False):
        return
    original = builder.create_dot

    def widened(t):
        if t.dtype.scalar != tl.bfloat16:
            return t
        data = interpreter._convert_float(t.data, tl.bfloat16, tl.float32, None)
        return interpreter.TensorHandle(data.view(numpy.float32), tl.float32)

    def create_dot(self, a, b, d, *args, **kwargs):
        return original(self, widened(a), widened(b), d, *args, **kwargs)

    create_dot._dt_bfloat16 = True
    builder.create_dot = create_dot
    return True


# Bound to a name: a generated module's top level holds no bare call (tests/server/test_api.py
# checks that a file name cannot smuggle one in).
_DT_INTERPRETER_BFLOAT16_DOT = _dt_interpreter_bfloat16_dot()

# Whether the kernels compile to PTX (an NVIDIA GPU, not the interpreter, which triton.jit picks
# when the module is imported): the math helpers then use PTX instructions (`_dt_div`).
_DT_PTX = tl.constexpr(os.environ.get("TRITON_INTERPRET") != "1" and torch.version.hip is None)

def _dt_tma(tensor):
    """Whether a kernel may read or write `tensor` through a tensor descriptor (`tma`): of 2 to 5
    dimensions and not empty, its last stride 1, its other strides positive multiples of 16
    bytes (a stride of 0, which a broadcast view or a dimension of one element may have, is no
    tensor map's) and its address one, its sizes below 2**31 (what the tensor memory accelerator
    and Triton's interpreter require). Its kernel uses pointers otherwise."""
    size, strides = tensor.element_size(), tensor.stride()
    return (2 <= tensor.dim() <= 5 and tensor.numel() > 0 and strides[-1] == 1
            and all(s > 0 and s * size % 16 == 0 for s in strides[:-1])
            and tensor.data_ptr() % 16 == 0 and max(tensor.shape) < 2**31)


def _dt_warp_specialize(device):
    """Whether a kernel launched on `device` may warp-specialize its loops (`warp_specialize`):
    on GPUs newer than Hopper. On Hopper (sm_90) Triton 3.6's warp-specialized loops write wrong
    results (triton-lang/triton#8311): on an H200 every warp-specialized product measured left
    rows of its tiles unwritten and wrote them elsewhere. There, and under the interpreter, the
    loop runs as it is."""
    if device.type != "cuda":
        return False
    return torch.cuda.get_device_capability(device)[0] >= 10


class _DtHopper:
    """The launch of a kernel whose product loop is warp-specialized (`warp_specialize`), which
    dtc prints twice: in Triton's language, which every GPU and the interpreter run, and in
    Gluon with the producer and consumer partitions written out (kir/WarpPartitions.h), which
    Hopper GPUs run, where Triton 3.6's own warp specialization is wrong. The Gluon kernel runs
    on a GPU of compute capability 9 when the constexpr flags at positions `flags` of the
    arguments all hold (each operand read through a tensor descriptor, in 16-bit floats), with
    at most `maxnreg` registers a thread (None: ptxas's own cap), with `warps` warps (None: the
    Triton kernel's; an online loop's Gluon kernel starts its consumers and producer as partitions
    of a 4-warp kernel, kir/OnlinePartitions.h). DT_GLUON=0 in the environment
    keeps the Triton kernel everywhere, for comparison. `kernel[grid](*args, num_warps=,
    num_stages=)` launches as a JIT function's does, returning the compiled kernel."""

    __slots__ = ("kernel", "gluon", "flags", "maxnreg", "warps")

    def __init__(self, kernel, gluon, flags, maxnreg, warps=None):
        self.kernel, self.gluon, self.flags, self.maxnreg = kernel, gluon, flags, maxnreg
        self.warps = warps

    def chosen(self, args):
        """The kernel that runs on `args`: the Gluon one or the Triton one."""
        if not _DT_PTX or os.environ.get("DT_GLUON", "1") == "0":
            return self.kernel
        if not all(args[i] for i in self.flags):
            return self.kernel
        device = next((a.device for a in args if isinstance(a, torch.Tensor)), None)
        if device is None or device.type != "cuda":
            return self.kernel
        return self.gluon if torch.cuda.get_device_capability(device)[0] == 9 else self.kernel

    def __getitem__(self, grid):
        def launch(*args, num_warps, num_stages):
            kernel = self.chosen(args)
            if kernel is self.kernel:
                return kernel[grid](*args, num_warps=num_warps, num_stages=num_stages)
            options = {} if self.maxnreg is None else {"maxnreg": self.maxnreg}
            return kernel[grid](*args, num_warps=self.warps or num_warps, **options)
        return launch


def _dt_tma_memory(device):
    """A kernel that makes tensor descriptors needs global memory for them at each launch, which
    Triton takes from the allocator set for the launching thread (triton.set_allocator): where
    the program has set none, one that allocates on `device`'s current stream."""
    if device.type != "cuda":
        return
    from triton.runtime import _allocation
    if _allocation._allocator.get() is _allocation._NULL_ALLOCATOR:
        triton.set_allocator(_dt_tma_allocate)


def _dt_tma_allocate(size, alignment, stream):
    return torch.empty(size, dtype=torch.int8, device="cuda")


_DT_MULTIPROCESSORS = {}  # device -> its streaming multiprocessors
_DT_INTERPRETED_PROGRAMS = 3  # persistent instances under the interpreter: each loops, unevenly


def _dt_programs(device, blocks):
    """The grid of a persistent kernel (`persistent`) over `blocks` output blocks: one program
    instance per streaming multiprocessor of `device`, never more than the blocks."""
    n = _DT_MULTIPROCESSORS.get(device)
    if n is None:
        n = (torch.cuda.get_device_properties(device).multi_processor_count
             if device.type == "cuda" else _DT_INTERPRETED_PROGRAMS)
        _DT_MULTIPROCESSORS[device] = n
    return max(1, min(blocks, n))


# The lean host path. A wrapper's first call with given argument metadata takes the full path:
# checks, size inference, Triton's launch (which specializes and compiles). What it worked out is
# kept in a plan under a key of that metadata; a later call with the same key skips the checks
# and launches each compiled kernel directly (_dt_direct): through a launch prepared once that
# takes only what changes from call to call, the tensors' addresses and scalars. Anything that
# could change a check's verdict, a size, a grid or Triton's specialization is in the key: each
# tensor's shape, strides, dtype, device and 16-byte alignment, the size keywords with their
# types, and the same for `out`.

_DT_PLANS_MAX = 256  # keys kept per wrapper; past that the cache starts again


def _dt_key(tensors, sizes, out):
    """The plan key of a call, or None when the full path must see it: an argument that is not
    a tensor or is a negative view (the full path says what is wrong), or an `out` that shares
    memory with an input (the full path computes into a new tensor)."""
    key = [sizes]
    if sizes.count(None) != len(sizes):
        try:
            hash(sizes)
        except TypeError:  # x=[2]: the full path says what is wrong
            return None
        key.append(tuple(map(type, sizes)))  # x=True and x=1.0 are refused where x=1 is not
    for tensor in tensors if out is None else (*tensors, out):
        if not isinstance(tensor, torch.Tensor) or tensor.is_neg():
            return None
        key.append((tensor.shape, tensor.stride(), tensor.dtype, tensor.device,
                    tensor.data_ptr() % 16 == 0))
    if out is not None and _dt_shares(out, tensors):
        return None  # the full path writes a new tensor and copies it into `out`
    return tuple(key)


_DT_KNOBS = triton.knobs.runtime


def _dt_hooked():
    """Whether a launch hook is installed (a profiler's): then Triton launches, which calls it."""
    try:
        return bool(_DT_KNOBS.launch_enter_hook.calls or _DT_KNOBS.launch_exit_hook.calls)
    except AttributeError:  # a hook that is not a HookChain
        return (_DT_KNOBS.launch_enter_hook, _DT_KNOBS.launch_exit_hook) != (None, None)


def _dt_launch(kernel, grid, args, num_warps, num_stages):
    return kernel[grid](*args, num_warps=num_warps, num_stages=num_stages)


# A launch prepared once (dt_launch.c, compiled on first use like Triton's own launchers and
# cached with them): per Triton parameter type, its type character there.
_DT_LAUNCH_TYPES = {"i1": "b", "i8": "b", "u1": "B", "u8": "B", "i16": "h", "u16": "H",
                    "i32": "i", "u32": "I", "i64": "l", "u64": "L", "fp16": "e", "bf16": "E",
                    "fp32": "f", "f32": "f", "fp64": "d"}
_DT_LAUNCHER = []  # [the compiled module, or None where it cannot be built]


def _dt_launcher():
    """The `_dt_launch` module built from dt_launch.c, or None: a C compiler or Python's headers
    missing (Triton's own launchers need them too), or DT_LAUNCHER=triton in the environment,
    which keeps Triton's launcher entry (for comparison)."""
    if not _DT_LAUNCHER:
        module = error = None
        if os.environ.get("DT_LAUNCHER", "") != "triton":
            try:
                from triton.runtime.build import compile_module_from_src
                include = os.path.join(os.path.dirname(triton.backends.nvidia.__file__), "include")
                module = compile_module_from_src(_DT_LAUNCH_C, "_dt_launch", include_dirs=[include])
            except Exception as e:  # noqa: BLE001 (any build failure: Triton's entry remains)
                error = e
        _DT_LAUNCHER.append(module)  # before warning: warnings may be errors
        if error is not None:
            import warnings
            warnings.warn(f"generated wrappers launch through Triton's launcher entry: the "
                          f"prepared launcher could not be built ({error})", RuntimeWarning,
                          stacklevel=4)
    return _DT_LAUNCHER[0]


def _dt_direct(compiled, grid, args, varying):
    """How to launch `compiled` again without Triton's per-call work, as `launch(stream,
    *values)`, where `values` are the arguments at positions `varying` of `args` (the first
    call's, whose other values every later call of the plan repeats): a prepared `Launch`
    (dt_launch.c) that packed the rest once; where it cannot serve (its module not built, a
    parameter type or a launch attribute it does not know), Triton's launcher entry, called
    with every argument. Tensors may be passed as tensors or as their addresses. None when
    Triton compiled a varying argument into the kernel (a constexpr): each call must then go
    through Triton, which specializes it."""
    launcher = compiled.run
    grid = tuple(grid) + (1,) * (3 - len(grid))
    signature = list(getattr(getattr(compiled, "src", None), "signature", {}).values())
    if any(i < len(signature) and signature[i] == "constexpr" for i in varying):
        return None
    num_warps, num_ctas, shared = compiled.packed_metadata
    # Scratch memory, which Triton's CudaLauncher allocates per call, rules out both direct ways.
    no_scratch = (getattr(launcher, "global_scratch_size", None) == 0
                  and getattr(launcher, "profile_scratch_size", None) == 0)
    module = _dt_launcher()
    if module is not None and no_scratch and len(signature) == len(args) and num_ctas == 1:
        types, values, at = "", [], {}  # at: argument position -> parameter position
        for i, (kind, value) in enumerate(zip(signature, args)):
            if kind == "constexpr":
                continue  # compiled into the kernel
            if not isinstance(kind, str):  # a tuple argument
                break
            code = "p" if kind.startswith("*") else _DT_LAUNCH_TYPES.get(kind)
            if code is None:
                break
            at[i] = len(types)
            types += code
            values.append(value)
        else:
            if all(i in at for i in varying):
                # Triton's kernels end with their global and profile scratch pointers: none here.
                return module.Launch(compiled.function, grid, 32 * num_warps, shared,
                                     bool(launcher.launch_cooperative_grid),
                                     bool(launcher.launch_pdl), types + "pp",
                                     (*values, 0, 0), tuple(at[i] for i in varying))
    entry = getattr(launcher, "launch", None)
    if (callable(entry) and no_scratch and hasattr(launcher, "launch_cooperative_grid")
            and hasattr(launcher, "launch_pdl")):
        run, head = entry, (compiled.function, launcher.launch_cooperative_grid,
                            launcher.launch_pdl, None, None, compiled.packed_metadata, None, None,
                            None)
    else:
        run, head = launcher, (compiled.function, compiled.packed_metadata, None, None, None)
    # The first call's tensors are not kept: their places are filled by each call.
    fixed = [None if i in varying else value for i, value in enumerate(args)]

    def launch(stream, *values):
        full = list(fixed)
        for i, value in zip(varying, values, strict=True):
            full[i] = value
        run(*grid, stream, *head, *full)
    return launch


_DT_WORK_ALIGN = 256  # bytes from one temporary to the next: Triton assumes 16-byte alignment


class _DtPlan:
    """What the full path worked out for one key: `values` (sizes, dtype, device); per launch
    slot, how to call the compiled kernel directly; and where the call's float32 temporaries lie
    in the one allocation that holds them. Under the interpreter nothing is compiled, so
    launches go through Triton each time, but the checks are still skipped."""
    __slots__ = ("values", "launches", "tried", "complete", "work_bytes", "offsets", "shapes",
                 "stream", "device_index", "plans", "key")

    def __init__(self, values, plans=None, key=None):
        self.values = values
        self.plans, self.key = plans, key  # where finish() keeps it
        self.launches = {}  # slot -> direct launch (_dt_direct)
        self.tried = set()  # slots launched through Triton: a failed one has no direct launch
        self.complete = False  # a call launched every kernel (finish())
        self.work_bytes, self.offsets, self.shapes = 0, (), ()
        self.stream = self.device_index = None  # the current stream's getter, and its device

    def direct(self):
        """`(stream, launches)` when every kernel of a call launches directly: after a call that
        launched them all (finish()), each compiled and launched, with no launch hook installed
        (a profiler's: then Triton launches, which calls it). The wrapper then calls
        `launches[slot](stream, ...)` itself with what varies: tensors' addresses and scalars
        (_dt_direct). Else None: a
        first call that failed part-way (out of memory between two launches), or another thread
        whose first call is still launching, leaves the plan incomplete, and Triton launches."""
        if (not self.complete or not self.launches or len(self.launches) != len(self.tried)
                or _dt_hooked()):
            return None
        return self.stream(self.device_index), self.launches

    def finish(self):
        """Called by the wrapper after a call that did not launch directly has launched every
        kernel: later calls may then launch directly, and a new plan is kept under its key
        (not before: another thread's call with that key would find it half made, and a first
        call that failed part-way leaves none)."""
        self.complete = True
        if self.key is not None and self.plans.get(self.key) is not self:
            if len(self.plans) >= _DT_PLANS_MAX:
                self.plans.clear()
            self.plans[self.key] = self

    def launch(self, slot, kernel, grid, args, num_warps, num_stages, varying):
        """Launches `kernel` over `grid` with `args`, of which the positions `varying` (its
        tensors and scalars) may change from call to call of this plan and the rest may not:
        directly once this slot has a direct launch, else through Triton, which compiles it the
        first time; the direct launch is then made (_dt_direct)."""
        direct = self.launches.get(slot)
        if direct is not None and not _dt_hooked():
            direct(self.stream(self.device_index), *[args[i] for i in varying])
            return
        self.tried.add(slot)
        compiled = _dt_launch(kernel, grid, args, num_warps, num_stages)
        if hasattr(compiled, "result"):  # compiled asynchronously
            compiled = compiled.result()
        if hasattr(compiled, "packed_metadata"):  # not the interpreter
            driver = triton.runtime.driver.active
            self.stream, self.device_index = driver.get_current_stream, driver.get_current_device()
            direct = _dt_direct(compiled, grid, args, varying)
            if direct is not None:  # else this slot, so the plan, keeps launching through Triton
                self.launches[slot] = direct

    def lay_out(self, device, shapes):
        """The full path's temporaries, contiguous float32 tensors of `shapes` in one new
        allocation: returns the allocation (keep it until the last launch) and the tensors."""
        offsets, end = [], 0
        for shape in shapes:
            offsets.append(end)
            end += -(-4 * math.prod(shape) // _DT_WORK_ALIGN) * _DT_WORK_ALIGN
        self.work_bytes, self.offsets, self.shapes = end, tuple(offsets), tuple(shapes)
        return self._tensors(device)

    def temporaries(self, device, direct):
        """A later call's temporaries, laid out as on the full path: their addresses, which the
        kernels' launchers take as they are, when every kernel launches directly (`direct`, from
        direct()); tensors when Triton launches one (under the interpreter, with a launch hook,
        or after a failed launch). Returns the allocation (keep it until the last launch) and
        them."""
        if direct is None:
            return self._tensors(device)
        work = torch.empty(self.work_bytes, dtype=torch.uint8, device=device)
        base = work.data_ptr()
        return work, [base + offset for offset in self.offsets]

    def _tensors(self, device):
        work = torch.empty(self.work_bytes, dtype=torch.uint8, device=device)
        return work, [work[offset:offset + 4 * math.prod(shape)].view(torch.float32).view(shape)
                      for offset, shape in zip(self.offsets, self.shapes)]


def _dt_tile(size, least):
    """A tile's width: the power of two at least `size` and at least `least` (what
    triton.next_power_of_2 gives, without its per-call cost)."""
    return max(least, 1 << (size - 1).bit_length()) if size > 1 else least


def _dt_plan(plans, key, values):
    """A new plan for `key`, which its first call's finish() keeps in `plans` unless the key is
    None."""
    return _DtPlan(values, plans, key)


class CudaGraph:
    """One call of a wrapper captured in a CUDA graph, for callers who launch it many times with
    the same tensors: `replay()` runs every kernel of the call from the graph, with no host work
    per kernel, and returns `output`, the tensor the captured call returned (written again by
    each replay). To run it on new values, copy them into the captured inputs (`args`) first.
    The call is made `warmup` times on a side stream before capture, so every kernel is compiled;
    the wrapper's tensors must stay alive and must not be resized."""

    def __init__(self, wrapper, *args, warmup=2, **kwargs):
        if not torch.cuda.is_available():
            raise ValueError("CudaGraph needs a CUDA device")
        self.args, self.kwargs = args, kwargs
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(warmup):
                wrapper(*args, **kwargs)
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.output = wrapper(*args, **kwargs)

    def replay(self):
        self.graph.replay()
        return self.output


def _dt_view(tensor, labels, layout):
    """Views `tensor`, whose dimensions are named by `labels`, with one dimension per entry of
    `layout` (size 1 where it does not vary), so that operands broadcast by label."""
    order = [labels.index(label) for label in layout if label in labels]
    shape = [tensor.shape[labels.index(label)] if label in labels else 1 for label in layout]
    return tensor.permute(order).reshape(shape)


def _dt_t(value):
    return torch.as_tensor(value, dtype=torch.float32)


def _dt_i(value):
    """A whole number as an int64 tensor (the reference's integers)."""
    return torch.as_tensor(value, dtype=torch.int64)


def _dt_position(size, label, layout, device):
    """The positions 0 .. size - 1 along `label`, over `layout`: a label's value."""
    return torch.arange(size, device=device).reshape(
        [size if entry == label else 1 for entry in layout])


def _dt_gather(tensor, positions):
    """`tensor` at one whole-number position per dimension (each a tensor over the layout, size
    1 where it does not vary, or a number), broadcast together: 0 where a position falls
    outside its dimension, as in the kernels."""
    device = tensor.device
    index = torch.broadcast_tensors(*(torch.as_tensor(p, dtype=torch.int64, device=device)
                                      for p in positions))
    inside = torch.ones(index[0].shape, dtype=torch.bool, device=device)
    clamped = []
    for extent, p in zip(tensor.shape, index):
        inside &= (p >= 0) & (p < extent)
        clamped.append(p.clamp(0, max(extent - 1, 0)))
    if tensor.numel() == 0:
        return torch.zeros(inside.shape, dtype=tensor.dtype, device=device)
    return torch.where(inside, tensor[tuple(clamped)],
                       torch.zeros((), dtype=tensor.dtype, device=device))


def _dt_result(value, layout, dims, shape):
    """A value over `layout` (size 1 along reduced labels) as a tensor of `shape` over `dims`."""
    value = torch.as_tensor(value).to(torch.float32)
    value = value.reshape([1] * (len(layout) - value.dim()) + list(value.shape))
    full = [shape[dims.index(label)] if label in dims else 1 for label in layout]
    value = value.expand(full)
    keep = [layout.index(label) for label in dims]
    rest = [axis for axis in range(len(layout)) if axis not in keep]
    return value.permute(keep + rest).reshape(list(shape)).contiguous()


def _dt_matmul(a, b, layout, i, k, j):
    """rdot of `a` (varying along labels i, k) and `b` (along k, j), over `layout`, as one
    matrix product; the result varies along i and j, size 1 along k."""
    ai, ak, bk, bj = (layout.index(label) for label in (i, k, k, j))
    left = a.movedim((ai, ak), (0, 1)).reshape(a.shape[ai], a.shape[ak])
    right = b.movedim((bk, bj), (0, 1)).reshape(b.shape[bk], b.shape[bj])
    product = left @ right
    shape = [1] * len(layout)
    shape[ai], shape[bj] = product.shape
    return (product if ai < bj else product.t()).reshape(shape)


def _dt_contract(a, b, dim):
    """rdot of two values aligned by label: the sum over `dim` of a * b, size 1 along `dim`, as
    one (batched) matrix product of torch.einsum, which never holds every product in memory;
    a size of 1 broadcasts as in a * b."""
    letters = "abcdefghijklmnopqrstuvwxyz"[:a.dim()]
    kept = letters.replace(letters[dim], "")
    return torch.einsum(f"{letters},{letters}->{kept}", a, b).unsqueeze(dim)


def _dt_amax(value, dim, keepdim):
    if value.shape[dim] == 0:
        return value.sum(dim=dim, keepdim=keepdim).fill_(float("-inf"))
    return torch.amax(value, dim=dim, keepdim=keepdim)


def _dt_amin(value, dim, keepdim):
    if value.shape[dim] == 0:
        return value.sum(dim=dim, keepdim=keepdim).fill_(float("inf"))
    return torch.amin(value, dim=dim, keepdim=keepdim)


def _dt_sizes(sizes, labels):
    missing = [label for label in labels if label not in sizes]
    if missing:
        raise ValueError(f"sizes lacks {', '.join(missing)} (needs {', '.join(labels)})")
    return tuple(int(sizes[label]) for label in labels)


def _dt_randn(shape, generator, dtype, device):
    return torch.randn(shape, generator=generator).to(dtype=dtype, device=device)


def _dt_randint(shape, high, generator, device):
    """Whole numbers from 0 to high - 1 (int64), for integer inputs."""
    return torch.randint(0, max(int(high), 1), shape, generator=generator).to(device=device)


def _dt_rand_scalar(generator):
    return 0.5 + float(torch.rand((), generator=generator))


def __getattr__(name):
    """A compiled Func whose Python name differs from its DT name (a keyword, a builtin, a name
    the module's own code uses) under its DT name, with its reference_, make_inputs_ and
    SIZE_KEYWORDS_ (PEP 562: consulted only for names the module does not define, so the
    module's own code never sees these names)."""
    python = _DT_ALIASES.get(name)
    if python is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return globals()[python]


def __dir__():
    return sorted({*globals(), *_DT_ALIASES})


# Each compiled Func as a torch custom op (docs/python.md), made on first request so that importing
# a module registers nothing: torch.compile and torch.export see one opaque op with a fake
# implementation instead of tracing into Triton's launcher. The namespace is the module's: a hash
# of its schedule and kernels, so two modules never share an op and the same module imported
# twice finds its op already registered.
_DT_OPS = {}  # DT name -> the custom op


def _dt_op_namespace():
    import hashlib

    text = [SCHEDULE, *COMPILED]
    for name, value in sorted(globals().items()):
        if isinstance(value, triton.runtime.JITFunction):
            text += [name, value.src]
    return "dtx_" + hashlib.sha256("\n".join(text).encode()).hexdigest()[:16]


def _dt_op_schema(python):
    """The op's schema, from the wrapper's positional parameters and the kinds of the arguments
    the module's own make_inputs_ gives (tensor, float, int), and the number of results from the
    reference run on those."""
    import inspect

    params = [p for p in inspect.signature(globals()[python]).parameters.values()
              if p.kind == inspect.Parameter.POSITIONAL_OR_KEYWORD]
    labels = set(globals()["SIZE_KEYWORDS_" + python].values())
    example = globals()["make_inputs_" + python]({label: 2 for label in labels})
    kinds = []
    for param, value in zip(params, example):
        if isinstance(value, torch.Tensor):
            kinds.append(f"Tensor {param.name}")
            continue
        kind = "SymInt" if isinstance(value, numbers.Integral) else "float"
        default = "" if param.default is inspect.Parameter.empty else f"={param.default!r}"
        kinds.append(f"{kind} {param.name}{default}")
    # Size keywords only where a label's size comes from no input (`f[x, y] = A[x]`): then the
    # op takes them, keyword-only and optional as the wrapper does (and torch hands them to an
    # autograd setup_context as keyword_only_inputs); else the schema is the positional one.
    reference, keywords, sizes = globals()["reference_" + python], (), []
    try:
        results = reference(*example)
    except ValueError:
        keywords = tuple(globals()["SIZE_KEYWORDS_" + python])
        sizes = [f"SymInt? {keyword}=None" for keyword in keywords]
        results = reference(*example, **{k: 2 for k in keywords})
    count = len(results) if isinstance(results, tuple) else 1
    returns = "Tensor" if count == 1 else "(" + ", ".join(["Tensor"] * count) + ")"
    return "(" + ", ".join(kinds + (["*"] + sizes if sizes else [])) + ") -> " + returns, count


def custom_op(func=None):
    """The compiled Func `func` (its DT name; the first compiled one by default) as the torch
    custom op torch.ops.<namespace>.<its Python name>, registered on first request. It takes the
    wrapper's positional arguments, and its size keywords where a label's size comes from no
    input, and returns new tensors (no `out`: a custom op that writes into its arguments is
    another op, and torch.compile allocates outputs itself); its
    fake implementation is the module's PyTorch reference run on fake tensors, which gives the
    shapes and dtypes. It has no backward until one is registered with
    torch.library.register_autograd."""
    if func is None:
        func = COMPILED[0]
    if func not in COMPILED:
        raise ValueError(f"custom_op: {func!r} is not a compiled Func of this module "
                         f"(compiled: {', '.join(COMPILED)})")
    op = _DT_OPS.get(func)
    if op is not None:
        return op
    python = PYTHON_NAMES[func]
    namespace = _dt_op_namespace()
    registered = getattr(getattr(torch.ops, namespace), python, None)
    if registered is not None:  # the same module imported again
        op = registered
    else:
        schema, count = _dt_op_schema(python)
        wrapper, reference = globals()[python], globals()["reference_" + python]

        def run(*args, **sizes):
            return wrapper(*args, **sizes)

        def fake(*args, **sizes):
            results = reference(*args, **sizes)
            results = results if isinstance(results, tuple) else (results,)
            empty = tuple(torch.empty(r.shape, dtype=r.dtype, device=r.device) for r in results)
            return empty if count > 1 else empty[0]

        op = torch.library.custom_op(f"{namespace}::{python}", run, mutates_args=(),
                                     schema=schema)
        op.register_fake(fake)
    _DT_OPS[func] = op
    return op
