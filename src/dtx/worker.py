#!/usr/bin/env python3
"""The measurement worker: checks and times dtc-generated modules for the explorer's pool.

    python src/dtx/worker.py --role timing|compile [--device-index N]

Speaks the JSON-lines protocol of docs/worker-protocol.md (version 1) on standard input and
standard output: one request per input line, one result per request, a hello line first.
Standard error is free-form log text. Nothing but protocol lines reaches standard output: the
process's file descriptor 1 is pointed at standard error at start (and 0 at /dev/null), so a
`print` or a read of stdin in a generated module, a baseline or a library cannot touch the
protocol streams.

Exit status: 0 after end of input or a `shutdown` request; 3 after a CUDA error, once its
`runtime_error` result is written (the CUDA context is poisoned and the pool must start a new
worker); 2 on a bad command line.

Uses only the standard library, torch and triton.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import hashlib
import importlib.util
import json
import math
import os
import pathlib
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import types
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, cast

if TYPE_CHECKING:
    from importlib.abc import Loader
    from importlib.machinery import ModuleSpec

    # Prepared's keys: (inputs key, func, sizes as JSON, dtype, seed).
    PreparedKey = tuple[str, str, str, str, int]

PROTOCOL = 1
EXIT_CUDA_ERROR = 3
DEFAULT_WARMUP_MS = 25.0
DEFAULT_REP_MS = 100.0
DEFAULT_GPU_REP_MS = 100.0
DEFAULT_HOST_CALLS = 1000
QUANTILES = (0.2, 0.5, 0.8)

# (rtol, atol) per dtype, and for float32 results of modules using tl.dot per DOT_PRECISION.
TOLERANCES = {"float32": (1e-4, 1e-5), "float16": (1e-2, 1e-2), "bfloat16": (5e-2, 5e-2)}
DOT_TOLERANCES = {"tf32": (1e-2, 1e-2), "tf32x3": (1e-4, 1e-4), "ieee": (1e-4, 1e-4)}
# The whole result's relative L2 error ||got - want|| / ||want||: per-element tolerances scaled
# for reductions let a kernel that is off by 1% everywhere pass on a large output; this does
# not. Correct kernels land far below (float16 GeGLU 4096^2 on an H100: 5e-6; TF32 matmul:
# 8e-4).
L2_TOLERANCES = {"float32": 1e-5, "float16": 1e-3, "bfloat16": 8e-3}
DOT_L2_TOLERANCES = {"tf32": 1e-2, "tf32x3": 1e-5, "ieee": 1e-5}

# Filled in by main() once the device is known and torch/triton are imported.
if TYPE_CHECKING:
    import torch
    import triton
else:
    torch = None
    triton = None
CUDA = False
DEVICE: torch.device | None = None


def log(*parts: object) -> None:
    print("dtx_worker:", *parts, file=sys.stderr, flush=True)


class Failure(Exception):
    """Ends a request with a status other than ok."""

    def __init__(self, status: str, message: str, check: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.check = check


def one_line(text: object, limit: int = 2000) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def describe(exc: BaseException) -> str:
    text = str(exc)
    return one_line(f"{type(exc).__name__}: {text}" if text else type(exc).__name__)


def json_safe(value: Any) -> Any:
    """`value` with NaN and infinities replaced by None: the protocol is strict JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


# ---------------------------------------------------------------------------------------------
# Streams


class Protocol:
    """The protocol's two streams, moved off file descriptors 0 and 1."""

    def __init__(self) -> None:
        sys.stdout.flush()
        out_fd = os.dup(1)
        in_fd = os.dup(0)
        os.dup2(2, 1)  # anything written to fd 1 from now on (C code included) goes to stderr
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        sys.stdout = sys.stderr
        sys.stdin = open(os.devnull, "r")
        self.out = os.fdopen(out_fd, "wb", buffering=0)
        self.inp = os.fdopen(in_fd, "rb")

    def send(self, message: dict[str, Any]) -> None:
        line = json.dumps(json_safe(message), allow_nan=False, separators=(",", ":")) + "\n"
        try:
            self.out.write(line.encode("utf-8"))
        except (BrokenPipeError, OSError) as e:
            log(f"cannot write to the pool ({e}); exiting")
            os._exit(1)

    def lines(self) -> Iterator[bytes]:
        while True:
            raw = self.inp.readline()
            if not raw:
                return
            yield raw


# ---------------------------------------------------------------------------------------------
# Device


def device_info() -> dict[str, Any]:
    if not CUDA:
        return {"kind": "cpu-interpreter", "name": "cpu-interpreter"}
    props = torch.cuda.get_device_properties(DEVICE)
    return {"kind": "cuda", "name": props.name, "sm_count": props.multi_processor_count,
            "memory_bytes": int(props.total_memory),
            "capability": f"{props.major}.{props.minor}", "cuda": torch.version.cuda,
            "driver": driver_version()}


def driver_version() -> str | None:
    try:
        run = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL)
        if run.returncode == 0 and run.stdout.strip():
            return run.stdout.strip().splitlines()[0].strip()
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        text = pathlib.Path("/proc/driver/nvidia/version").read_text()
        match = re.search(r"Kernel Module(?: for [^ ]+)?\s+([0-9][0-9.]*)", text)
        if match:
            return match.group(1)
    except OSError:
        pass
    return None


def gpu_index(device_index: int) -> int | None:
    """The GPU's index on this machine (as nvidia-smi numbers it), or None on the interpreter:
    the entry of CUDA_VISIBLE_DEVICES the worker uses, when it is a number."""
    if not CUDA:
        return None
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")
               if v.strip()]
    if "CUDA_VISIBLE_DEVICES" not in os.environ:
        return device_index
    if device_index < len(visible) and visible[device_index].isdigit():
        return int(visible[device_index])
    return None


def synchronize() -> None:
    if CUDA:
        torch.cuda.synchronize(DEVICE)


CUDA_ERROR_PATTERN = re.compile(
    r"CUDA error|CUDA_ERROR|cudaError|Triton Error \[CUDA\]|illegal memory access|"
    r"illegal instruction|misaligned address|device-side assert|unspecified launch failure|"
    r"an illegal|uncorrectable ECC", re.IGNORECASE)


def cuda_context_lost(exc: BaseException) -> bool:
    """Whether `exc` left the CUDA context unusable (an illegal memory access and the like)."""
    if not CUDA:
        return False
    accelerator_error = getattr(torch, "AcceleratorError", None)
    if accelerator_error is not None and isinstance(exc, accelerator_error):
        return True
    if isinstance(exc, torch.cuda.OutOfMemoryError):
        return False
    if CUDA_ERROR_PATTERN.search(f"{type(exc).__name__}: {exc}"):
        return True
    try:
        torch.cuda.synchronize(DEVICE)
    except Exception:  # noqa: BLE001  (any failure here means the context is gone)
        return True
    return False


def classify(exc: BaseException, what: str) -> Failure:
    """The Failure for an exception raised while `what` ran."""
    from triton.compiler.errors import CompilationError
    from triton.runtime.errors import InterpreterError, OutOfResources
    try:
        from triton.runtime.errors import PTXASError
    except ImportError:  # pragma: no cover
        PTXASError = CompilationError
    if isinstance(exc, OutOfResources):
        return Failure("out_of_resources", describe(exc))
    if isinstance(exc, (CompilationError, PTXASError)):
        return Failure("compile_error", f"{what}: {describe(exc)}")
    if isinstance(exc, InterpreterError):
        # The interpreter runs a kernel's Python: an error in it is the interpreter's analogue
        # of Triton failing to compile the kernel.
        return Failure("compile_error", f"{what}: kernel failed in the Triton interpreter: "
                                        f"{describe(exc)}")
    return Failure("runtime_error", f"{what}: {describe(exc)}")


# ---------------------------------------------------------------------------------------------
# Modules


INPUTS_KEY_LINE = "INPUTS_KEY = ("


def inputs_key(source: str) -> str | None:
    """What a module's make_inputs and references compute depends on, as dtc wrote it in the
    module's last line, `INPUTS_KEY = ("<key>", "<sha256 of the text above>")`: modules of one
    program under different schedules share it, so their inputs and reference result are made
    once (at 4096^2 making them cost a timing worker 0.3 s a request on an H100). None when the
    module has no such line or its text is not what dtc wrote (the second hash differs): an
    edited module never shares what it might compute differently."""
    at = source.rfind("\n" + INPUTS_KEY_LINE) + 1
    line = source[at:] if at else ""
    if not line.endswith(")\n") or line.count("\n") != 1:
        return None
    fields = line[len(INPUTS_KEY_LINE):-2].split(", ")
    if len(fields) != 2 or not all(len(f) == 66 and f[0] == f[-1] == '"' for f in fields):
        return None
    key, above = (f[1:-1] for f in fields)
    if hashlib.sha256(source[:at].encode("utf-8")).hexdigest() != above:
        return None
    return key


class Prepared:
    """Inputs and reference results by (inputs key, func, sizes, dtype, seed), the last few.
    Each request gets clones of the inputs, so a baseline that writes into its arguments cannot
    change another request's."""

    def __init__(self, capacity: int = 3) -> None:
        self.capacity = capacity
        self.entries: collections.OrderedDict[PreparedKey, dict[str, Any]] = \
            collections.OrderedDict()

    def get(self, key: PreparedKey | None,
            make: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        if key is None:
            return make()
        if key in self.entries:
            self.entries.move_to_end(key)
        else:
            self.entries[key] = make()
            while len(self.entries) > self.capacity:
                self.entries.popitem(last=False)
        return self.entries[key]

    def drop(self, entry: dict[str, Any]) -> None:
        """Forgets `entry` (one `get` returned)."""
        for key, value in list(self.entries.items()):
            if value is entry:
                del self.entries[key]


@contextlib.contextmanager
def kernels_not_launched(module: types.ModuleType, load: bool = False) -> Iterator[None]:
    """Within it, the module's @triton.jit kernels compile for the arguments they are called
    with, as a launch would, but do not run (Triton's warm-up path); with `load`, each compiled
    kernel's binary is also loaded onto the device, which Triton otherwise does at the first
    launch. The wrappers keep no plan meanwhile: a plan launches compiled kernels directly, past
    Triton's warm-up switch."""
    from triton.runtime.jit import JITFunction
    patched: list[Any] = []
    for value in list(vars(module).values()):
        if isinstance(value, JITFunction) and "run" not in vars(value):
            def run(*args: Any, _original: Callable[..., Any] = value.run,
                    **kwargs: Any) -> Any:
                kwargs["warmup"] = True
                compiled = _original(*args, **kwargs)
                if load and compiled is not None and hasattr(compiled, "_init_handles"):
                    compiled._init_handles()
                return compiled
            value.run = run
            patched.append(value)
    make_plan = vars(module).get("_dt_plan")
    plans = [v for k, v in vars(module).items() if k.startswith("_dt_plans_") and isinstance(v, dict)]
    if make_plan is not None:
        setattr(module, "_dt_plan", lambda plans, key, values: make_plan({}, None, values))
    for cache in plans:
        cache.clear()
    try:
        yield
    finally:
        for value in patched:
            del value.run
        if make_plan is not None:
            setattr(module, "_dt_plan", make_plan)


def clone_inputs(inputs: Iterable[Any]) -> tuple[Any, ...]:
    return tuple(t.clone() if isinstance(t, torch.Tensor) else t for t in inputs)


def fingerprint(tensors: Iterable[torch.Tensor]) -> list[int]:
    """A sum of each tensor's bits as 64-bit words (wrapping, so in any order the same), with
    the bytes before the first aligned word and after the last one summed apart: any write into
    one of them changes it but for a chance of one in 2^64. One device synchronization, no copy
    of a contiguous tensor (a sum of narrower words into int64 converts the whole tensor first:
    20 times slower)."""
    sums = []
    for t in tensors:
        raw = t.detach().contiguous().reshape(-1).view(torch.uint8)
        head = min(raw.numel(), -raw.storage_offset() % 8)
        words = (raw.numel() - head) // 8
        body = raw[head:head + 8 * words]
        sums.append(body.view(torch.int64).sum() if words else body.sum(dtype=torch.int64))
        rest = torch.cat([raw[:head], raw[head + 8 * words:]])
        sums.append(rest.sum(dtype=torch.int64))
    return [int(v) for v in torch.stack(sums).tolist()] if sums else []


def state_tensors(prepared: dict[str, Any]) -> list[torch.Tensor]:
    """The inputs and references a worker keeps across requests (Prepared)."""
    kept = [t for t in prepared["inputs"] if isinstance(t, torch.Tensor)]
    for r in prepared.get("reference") or ():
        kept += r.tensors()
    return kept


GUARD_ELEMENTS = 1 << 22  # at most, each side of a checked output
GUARD_BYTE = 0xA5  # each byte of a guard zone: no NaN, no value a kernel is likely to write


class GuardedOutput:
    """A NaN-poisoned output for the check, inside a buffer with a guard zone on each side (as
    large as the output, between 4 Ki and 4 Mi elements, 256-byte aligned) whose bytes are all
    GUARD_BYTE: a kernel that writes past either end of its output, NaN or any value, changes a
    guard, which `outside()` counts."""

    def __init__(self, want: torch.Tensor) -> None:
        numel, size = want.numel(), want.element_size()
        guard = min(max(numel, 4096), GUARD_ELEMENTS)
        guard += -guard % max(1, 256 // size)
        self.guard, self.size = guard, size
        self.bytes = torch.full(((guard + numel + guard) * size,), GUARD_BYTE, dtype=torch.uint8,
                                device=want.device)
        out = self.bytes[guard * size:(guard + numel) * size].view(want.dtype)
        out.fill_(float("nan"))
        self.out = out.view(tuple(want.shape))

    def outside(self) -> tuple[int, int]:
        """Elements written before and after the output (an element any of whose bytes is no
        longer GUARD_BYTE)."""
        end = (self.guard + self.out.numel()) * self.size
        counts = []
        for zone in (self.bytes[:self.guard * self.size], self.bytes[end:]):
            touched = (zone != GUARD_BYTE).view(-1, self.size).any(dim=1)
            counts.append(torch.count_nonzero(touched))
        b, a = torch.stack(counts).tolist()
        return int(b), int(a)


class Modules:
    """Generated modules by SHA-256 of their source, and baseline files by path."""

    def __init__(self) -> None:
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix="dtx_worker_"))
        self.by_hash: dict[str, types.ModuleType] = {}
        self.baselines: dict[tuple[str, int], types.ModuleType] = {}
        self.compiled_baselines: dict[tuple[tuple[str, int], str], Callable[..., Any]] = {}

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def get(self, spec: object) -> tuple[types.ModuleType, float]:
        """(module, import seconds, 0 when cached) for a request's `module` object."""
        if not isinstance(spec, dict):
            raise Failure("runtime_error", "`module` must be an object with `source` and `sha256`")
        source, sha = spec.get("source"), spec.get("sha256")
        if not isinstance(source, str) or not isinstance(sha, str):
            raise Failure("runtime_error", "`module` needs `source` and `sha256` strings")
        actual = hashlib.sha256(source.encode("utf-8")).hexdigest()
        if actual != sha.lower():
            raise Failure("runtime_error", f"module sha256 mismatch: the request says {sha} but "
                                           f"the source hashes to {actual}")
        if actual in self.by_hash:
            return self.by_hash[actual], 0.0
        name = f"dtx_module_{actual[:24]}"
        path = self.dir / f"{name}.py"
        path.write_text(source, encoding="utf-8")
        start = time.perf_counter()
        module = import_path(name, path, "the module does not import")
        seconds = time.perf_counter() - start
        setattr(module, "__dtx_inputs_key__", inputs_key(source))
        self.by_hash[actual] = module
        return module, seconds

    def baseline(self, spec: object, module: types.ModuleType,
                 python: str) -> tuple[Callable[..., Any], bool]:
        """The callable a `baseline` object names, taking the positional inputs (`python`: the
        Python name of the compiled Func)."""
        if not isinstance(spec, dict):
            raise Failure("runtime_error", "`baseline` must be an object")
        if spec.get("reference") is True:
            reference = lookup(module, f"reference_{python}")
            return reference, True
        path, function = spec.get("file"), spec.get("function")
        if not isinstance(path, str) or not isinstance(function, str):
            raise Failure("runtime_error", "`baseline` needs `file` and `function` strings, or "
                                           "`reference: true`")
        torch_compile = spec.get("torch_compile", False)
        if not isinstance(torch_compile, bool):
            raise Failure("runtime_error", "`baseline.torch_compile` must be true or false")
        file = pathlib.Path(path)
        try:
            stamp = file.stat().st_mtime_ns
        except OSError as e:
            raise Failure("runtime_error", f"baseline file {path}: {describe(e)}") from None
        key = (str(file.resolve()), stamp)
        if key not in self.baselines:
            tag = hashlib.sha256(repr(key).encode()).hexdigest()[:16]
            self.baselines[key] = import_path(f"dtx_baseline_{tag}", file,
                                              f"baseline file {path} does not import")
        fn = getattr(self.baselines[key], function, None)
        if not callable(fn):
            raise Failure("runtime_error", f"baseline file {path} has no function `{function}`")
        if torch_compile:
            ckey = (key, function)
            if ckey not in self.compiled_baselines:
                try:
                    self.compiled_baselines[ckey] = torch.compile(fn)
                except (Exception, SystemExit) as e:  # noqa: BLE001
                    raise Failure("runtime_error", f"torch.compile({function}): {describe(e)}") \
                        from None
            fn = self.compiled_baselines[ckey]
        return fn, False


def import_path(name: str, path: pathlib.Path, what: str) -> types.ModuleType:
    # None for a file without a Python suffix: module_from_spec raises AttributeError then.
    spec = cast("ModuleSpec", importlib.util.spec_from_file_location(name, path))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        cast("Loader", spec.loader).exec_module(module)
    except (Exception, SystemExit) as e:  # noqa: BLE001  (any failure to import)
        sys.modules.pop(name, None)
        log(f"{what}:\n{traceback.format_exc()}")
        raise Failure("compile_error", f"{what}: {describe(e)}") from None
    return module


def python_names(module: types.ModuleType) -> dict[str, str]:
    """The module's compiled Funcs, DT name -> the Python name of the wrapper (whose reference
    is `reference_<python name>`, and so on): its PYTHON_NAMES table, or, in a module printed
    before there was one, its COMPILED names as they are."""
    names = getattr(module, "PYTHON_NAMES", None)
    compiled = getattr(module, "COMPILED", None)
    if not isinstance(compiled, tuple):
        return {}
    if not isinstance(names, dict):
        return {f: f for f in compiled if isinstance(f, str)}
    return {f: names[f] for f in compiled
            if isinstance(f, str) and isinstance(names.get(f), str)}


def lookup(module: types.ModuleType, name: str) -> Any:
    value = getattr(module, name, None)
    if value is None:
        raise Failure("runtime_error", f"the module has no `{name}`")
    return value


# ---------------------------------------------------------------------------------------------
# The check


@contextlib.contextmanager
def tf32_products() -> Iterator[None]:
    """torch's float32 matrix products on TF32 tensor cores (cuBLAS, and the kernels
    torch.compile makes for them) inside, as they were after. A baseline of a float32 Func whose
    products are TF32 (dot_precision) is checked and timed inside, on the arithmetic of the
    Func's own products, not against full float32 products 5 to 8 times slower; the reference
    stays in float32. Through the API the process already uses: torch raises where its legacy flags
    (allow_tf32, set_float32_matmul_precision) and its per-backend ones (fp32_precision) are
    mixed. A precision of "high" or "medium" allows TF32 or less already, and stays."""
    try:
        was = torch.get_float32_matmul_precision()
    except RuntimeError:  # the process set torch.backends.*.fp32_precision
        was = None
    if was == "highest":
        torch.set_float32_matmul_precision("high")
        try:
            yield
        finally:
            torch.set_float32_matmul_precision("highest")
    elif was is None:
        matmul = torch.backends.cuda.matmul
        before = matmul.fp32_precision
        matmul.fp32_precision = "tf32"
        try:
            yield
        finally:
            matmul.fp32_precision = before
    else:
        yield


def dot_precision(module: types.ModuleType, func: str) -> Any:
    """How the compiled Func `func` (DT name) multiplies float32 operands: its entry of the
    module's DOT_PRECISIONS (the kernels its wrapper launches), else, in a module printed
    before there was one, the module's DOT_PRECISION (the loosest of all its kernels)."""
    by_func = getattr(module, "DOT_PRECISIONS", None)
    if isinstance(by_func, dict):
        return by_func.get(func)
    return getattr(module, "DOT_PRECISION", None)


# dot_precision: the Func's (dot_precision above), unchecked (None when it has none).
def tolerances(dtype_name: str, dot_precision: Any) -> tuple[float, float]:
    if dtype_name == "float32" and dot_precision in DOT_TOLERANCES:
        return DOT_TOLERANCES[dot_precision]
    return TOLERANCES[dtype_name]


def l2_tolerance(dtype_name: str, dot_precision: Any) -> float:
    if dtype_name == "float32" and dot_precision in DOT_L2_TOLERANCES:
        return DOT_L2_TOLERANCES[dot_precision]
    return L2_TOLERANCES[dtype_name]


class Reference:
    """What comparing with one reference result needs of it alone, computed once for every
    module checked against it (in float64, on its device)."""

    def __init__(self, want: torch.Tensor) -> None:
        self.want = want
        self.w = want.detach().to(torch.float64)
        self.w_nan, self.w_inf = torch.isnan(self.w), torch.isinf(self.w)
        self.w_finite = torch.isfinite(self.w)
        self.w_abs = self.w.abs()
        finite_abs = torch.where(self.w_finite, self.w_abs, 0.0)
        self.scale = max(1.0, finite_abs.max().item()) if want.numel() else 1.0

    def tensors(self) -> list[torch.Tensor]:
        """What the comparisons read: a kernel that writes outside its output may change it."""
        return [self.want, self.w, self.w_nan, self.w_inf, self.w_finite, self.w_abs]

    def allowed(self, rtol: float, atol: float) -> torch.Tensor:
        """|got - want| allowed at each element."""
        return atol * self.scale + rtol * self.w_abs


def compare(got: object, want: torch.Tensor, rtol: float, atol: float,
            reference: Reference | None = None) -> tuple[dict[str, Any], str]:
    """The check object for `got` against the reference `want`, and a one-line message for the
    first bad element ('' when none). `unwritten` counts NaN where the reference is not NaN;
    `mismatched` counts the other elements that fail, so an element is in at most one. One
    device synchronization when all is well (a screening measurement's check must be cheap)."""
    check: dict[str, Any] = {"max_abs": 0.0, "max_rel": 0.0, "rel_l2": 0.0, "mismatched": 0,
                             "unwritten": 0, "rtol": rtol, "atol": atol}
    if not isinstance(got, torch.Tensor):
        check["mismatched"] = want.numel()
        return check, f"the result is a {type(got).__name__}, not a tensor"
    if tuple(got.shape) != tuple(want.shape):
        check["mismatched"] = want.numel()
        return check, f"result shape {tuple(got.shape)} differs from the reference's " \
                      f"{tuple(want.shape)}"
    if want.numel() == 0:
        return check, ""
    r = reference if reference is not None and reference.want is want else Reference(want)
    g = got.detach().to(device=want.device, dtype=torch.float64)
    g_nan, g_finite = torch.isnan(g), torch.isfinite(g)
    diff = (g - r.w).abs()
    good = torch.where(r.w_nan, g_nan,
                       torch.where(r.w_inf, g == r.w, g_finite & (diff <= r.allowed(rtol, atol))))
    unwritten = g_nan & ~r.w_nan
    mismatched = ~good & ~unwritten
    finite = r.w_finite & g_finite
    d = torch.where(finite, diff, 0.0)
    wf = torch.where(finite, r.w_abs, 0.0)
    relative = torch.where(wf > 0, d / torch.where(wf > 0, wf, 1.0), 0.0)
    n_unwritten, n_mismatched, max_abs, max_rel, err, norm = torch.stack([
        unwritten.sum(dtype=torch.float64), mismatched.sum(dtype=torch.float64), d.max(),
        relative.max(), torch.linalg.vector_norm(d), torch.linalg.vector_norm(wf)]).tolist()
    check["unwritten"], check["mismatched"] = int(n_unwritten), int(n_mismatched)
    check["max_abs"], check["max_rel"] = max_abs, max_rel
    check["rel_l2"] = err / norm if norm > 0 else err
    message = ""
    if check["unwritten"] or check["mismatched"]:
        bad = ~good
        flat = int(bad.flatten().nonzero()[0].item())
        index: list[int] | tuple[int, ...]
        index = []
        for size in reversed(want.shape):
            index.append(flat % size)
            flat //= size
        index = tuple(reversed(index))
        g_at, w_at = got[index].item(), want[index].item()
        kind = "unwritten (NaN)" if bool(unwritten[index]) else "mismatched"
        message = (f"{check['mismatched']} mismatched and {check['unwritten']} unwritten of "
                   f"{want.numel()} elements; first at {list(index)}: {kind}, got {g_at!r}, "
                   f"want {w_at!r} (rtol {rtol}, atol {atol} x scale {r.scale:.3g})")
    return check, message


def compare_results(got: object, want: torch.Tensor | tuple[torch.Tensor, ...], rtol: float,
                    atol: float, references: list[Reference],
                    ) -> tuple[dict[str, Any] | None, str]:
    """compare() of each result of a wrapper that returns one or several (a tuple as its
    reference returns): the counts added, the largest errors, the first message."""
    if not isinstance(want, tuple):
        return compare(got, want, rtol, atol, references[0])
    if not isinstance(got, (tuple, list)) or len(got) != len(want):
        check: dict[str, Any] = {"max_abs": 0.0, "max_rel": 0.0, "rel_l2": 0.0,
                                 "mismatched": sum(w.numel() for w in want), "unwritten": 0,
                                 "rtol": rtol, "atol": atol}
        what = f"{len(got)} results" if isinstance(got, (tuple, list)) else \
            f"a {type(got).__name__}"
        return check, f"the reference returns {len(want)} results, this returned {what}"
    total, first = None, ""
    for i, (g, w, r) in enumerate(zip(got, want, references)):
        check, message = compare(g, w, rtol, atol, r)
        if total is None:
            total = check
        else:
            for key in ("mismatched", "unwritten"):
                total[key] += check[key]
            for key in ("max_abs", "max_rel", "rel_l2"):
                total[key] = max(total[key], check[key])
        if message and not first:
            first = f"result {i + 1} of {len(want)}: {message}"
    return total, first


# ---------------------------------------------------------------------------------------------
# Times


def summary(times_ms: list[float]) -> dict[str, float]:
    q20, median, q80 = quantiles(times_ms, QUANTILES)
    return {"median_ms": median, "q20_ms": q20, "q80_ms": q80, "min_ms": min(times_ms),
            "max_ms": max(times_ms), "samples": len(times_ms)}


def quantiles(values: Iterable[float], qs: Iterable[float]) -> list[float]:
    """Linear-interpolation quantiles, as triton.testing computes them."""
    values = sorted(values)
    n = len(values)
    result: list[float] = []
    for q in qs:
        point = q * (n - 1)
        lower, upper = math.floor(point), math.ceil(point)
        t = point - lower
        result.append((1 - t) * values[lower] + t * values[upper])
    return result


def bench_cuda(fn: Callable[[], object], warmup_ms: float, rep_ms: float,
               while_waiting: Callable[[], object] | None = None,
               ) -> tuple[list[float], float]:
    """`triton.testing.do_bench(fn, warmup_ms, rep_ms, return_mode="all")`, step for step as
    Triton 3.6 writes it (one call; five calls with L2 flushes to estimate; warm-up and
    repetitions by time, each repetition after an L2 flush between two events), except that
    the repetitions' events are made during the warm-up and that `while_waiting` runs on the
    host once the last repetition's end event is enqueued, before the final synchronization.
    The host enqueues faster than the GPU works through a repetition, so most of the timed GPU
    work is still queued then: a timing worker prepares its next request there (import, kernel
    binaries) instead of waiting. It cannot change the times: every event is already
    recorded, and whatever it enqueues runs after them. Returns the samples (ms) and `busy_s`,
    the seconds the device spent on this measurement: the host's wall time up to the
    estimate, then the GPU's own span from the first warm-up call to the last repetition (one
    more event, outside every timed interval), so that time the host spends in
    `while_waiting` after the GPU is done does not count."""
    from triton import runtime
    driver = runtime.driver.active
    di = driver.get_device_interface()
    begin = time.perf_counter()
    fn()
    di.synchronize()
    cache = driver.get_empty_cache_for_benchmark()
    start_event = di.Event(enable_timing=True)
    end_event = di.Event(enable_timing=True)
    start_event.record()
    for _ in range(5):
        driver.clear_cache(cache)
        fn()
    end_event.record()
    di.synchronize()
    estimate_ms = start_event.elapsed_time(end_event) / 5
    estimated = time.perf_counter()
    n_warmup = max(1, int(warmup_ms / estimate_ms))
    n_repeat = max(1, int(rep_ms / estimate_ms))
    first = di.Event(enable_timing=True)
    first.record()
    for _ in range(n_warmup):
        fn()
    # Made while the GPU runs the warm-up, not before it as do_bench does: a few hundred events
    # take the host a millisecond or two, in which the GPU would wait.
    starts = [di.Event(enable_timing=True) for _ in range(n_repeat)]
    ends = [di.Event(enable_timing=True) for _ in range(n_repeat)]
    for i in range(n_repeat):
        driver.clear_cache(cache)
        starts[i].record()
        fn()
        ends[i].record()
    if while_waiting is not None:
        while_waiting()
    di.synchronize()
    busy_s = estimated - begin + first.elapsed_time(ends[-1]) / 1e3
    return [s.elapsed_time(e) for s, e in zip(starts, ends)], busy_s


def bench_interpreter(fn: Callable[[], object], warmup_ms: float, rep_ms: float,
                      while_waiting: Callable[[], object] | None = None,
                      ) -> tuple[list[float], float]:
    """do_bench's procedure timed with the host clock: the interpreter has no device events.
    `while_waiting` runs after the last timed call, outside `busy_s` (the wall time before)."""
    begin = time.perf_counter()
    fn()
    start = time.perf_counter()
    for _ in range(5):
        fn()
    estimate_ms = (time.perf_counter() - start) * 1e3 / 5
    n_warmup = max(1, int(warmup_ms / estimate_ms)) if estimate_ms > 0 else 1
    n_repeat = max(1, int(rep_ms / estimate_ms)) if estimate_ms > 0 else 1000
    for _ in range(n_warmup):
        fn()
    samples: list[float] = []
    for _ in range(n_repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e3)
    busy_s = time.perf_counter() - begin
    if while_waiting is not None:
        while_waiting()
    return samples, busy_s


def number(options: dict[str, Any], key: str, default: float, kind: str,
           zero: bool = False) -> float:
    """`zero`: 0 is allowed too (a warm-up of 0 ms is one call, as do_bench makes it)."""
    value = options.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value < 0 or (value == 0 and not zero):
        raise Failure("runtime_error", f"`times.{kind}.{key}` must be a "
                      f"{'number >= 0' if zero else 'positive number'}")
    return value


def parse_times(spec: object) -> dict[str, tuple[float, ...]]:
    if spec is None:
        return {}
    if not isinstance(spec, dict):
        raise Failure("runtime_error", "`times` must be an object")
    parsed: dict[str, tuple[float, ...]] = {}
    for kind, options in spec.items():
        if options is None:
            options = {}
        if not isinstance(options, dict):
            raise Failure("runtime_error", f"`times.{kind}` must be an object")
        if kind == "bench":
            parsed[kind] = (number(options, "warmup_ms", DEFAULT_WARMUP_MS, kind, zero=True),
                            number(options, "rep_ms", DEFAULT_REP_MS, kind))
        elif kind == "gpu":
            parsed[kind] = (number(options, "rep_ms", DEFAULT_GPU_REP_MS, kind),)
        elif kind == "host":
            calls = options.get("calls", DEFAULT_HOST_CALLS)
            if isinstance(calls, bool) or not isinstance(calls, int) or calls < 1:
                raise Failure("runtime_error", "`times.host.calls` must be a positive integer")
            parsed[kind] = (calls,)
        else:
            raise Failure("runtime_error", f"unknown time `{kind}` (bench, gpu or host)")
    return parsed


def measure_times(fn: Callable[[], object], wanted: dict[str, tuple[float, ...]],
                  notes: list[str], while_waiting: Callable[[], object] | None = None,
                  ) -> tuple[dict[str, dict[str, float]], float]:
    """The times `wanted` of `fn`, and the seconds the device spent taking them (`timed_s`).
    `while_waiting` runs inside `bench`; not at all when `bench` is not wanted."""
    times: dict[str, dict[str, float]] = {}
    busy_s = 0.0
    if "bench" in wanted:
        warmup_ms, rep_ms = wanted["bench"]
        bench = bench_cuda if CUDA else bench_interpreter
        samples, busy_s = bench(fn, warmup_ms, rep_ms, while_waiting)
        times["bench"] = summary(samples)
    start = time.perf_counter()
    if "gpu" in wanted:
        if CUDA:
            (rep_ms,) = wanted["gpu"]
            samples = triton.testing.do_bench_cudagraph(fn, rep=rep_ms, return_mode="all")
            times["gpu"] = summary(samples)
        else:
            notes.append("gpu not measured on the interpreter")
    if "host" in wanted:
        (calls,) = cast("tuple[int]", wanted["host"])  # parse_times made it an int
        fn()
        synchronize()
        begin = time.perf_counter()
        for _ in range(calls):
            fn()
        synchronize()
        times["host"] = {"per_call_us": (time.perf_counter() - begin) * 1e6 / calls,
                         "calls": calls}
    if times and not CUDA:
        notes.append("times are the Triton interpreter's on the CPU, not comparable with GPU "
                     "times")
    return times, busy_s + time.perf_counter() - start


class CompileClock:
    """Seconds Triton spends in `compile` (cache hits included), through its listener hook."""

    def __init__(self) -> None:
        self.micros = 0       # in compiles that missed the cache
        self.misses = 0
        self.hits = 0
        try:
            import triton.knobs as knobs
            knobs.compilation.listener = self
        except (ImportError, AttributeError):  # pragma: no cover  (older triton)
            pass

    def __call__(self, *, times: Any, cache_hit: bool = False, **_: Any) -> None:
        if cache_hit:
            self.hits += 1
        else:
            self.misses += 1
            self.micros += times.total

    def mark(self) -> tuple[int, int, int]:
        return (self.micros, self.misses, self.hits)

    def since(self, mark: tuple[int, int, int]) -> dict[str, float]:
        """compile_s (seconds compiling kernels the cache lacked), compiled (their number) and
        cache_hits (kernels loaded from TRITON_CACHE_DIR) since `mark`."""
        micros, misses, hits = mark
        return {"compile_s": (self.micros - micros) / 1e6, "compiled": self.misses - misses,
                "cache_hits": self.hits - hits}


# ---------------------------------------------------------------------------------------------
# Requests

DTYPE_NAMES = ("float32", "float16", "bfloat16")


class Profile:
    """DTX_WORKER_PROFILE=DIR: a cProfile of the requests served, rewritten to DIR/ROLE-PID.prof
    after every 16th (the pool kills its workers at the end, so there is no last word): where a
    request's time goes outside the timed part."""

    def __init__(self, path: pathlib.Path) -> None:
        import cProfile
        self.path = path
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.profiler = cProfile.Profile()
        self.served = 0
        self.profiler.enable()

    def save(self) -> None:
        self.served += 1
        if self.served % 16 == 0:
            self.profiler.disable()
            partial = self.path.with_suffix(".partial")
            self.profiler.dump_stats(str(partial))
            os.replace(partial, self.path)  # a kill while writing leaves the last whole one
            self.profiler.enable()


class Worker:
    profile: Profile | None = None

    def __init__(self, role: str) -> None:
        self.role = role
        self.modules = Modules()
        self.prepared = Prepared()
        self.compile_clock = CompileClock()
        # module SHA-256 -> what prefetch() spent on it
        self.prefetched: dict[str, dict[str, float]] = {}

    def resolve(self, request: dict[str, Any]) -> types.SimpleNamespace:
        """What a measure, baseline or compile request names: its module (imported), wrapper,
        reference and inputs, checked."""
        call = types.SimpleNamespace()
        call.module, call.import_s = self.modules.get(request.get("module"))
        module = call.module
        func = call.func = request.get("func")
        names = python_names(module)
        if not isinstance(func, str) or func not in names:
            raise Failure("runtime_error", f"`func` {func!r} is not a compiled Func of the module "
                                           f"(COMPILED: {', '.join(names) or 'none'})")
        python = call.python = names[func]  # the DT name's Python name
        call.wrapper = lookup(module, python)
        call.reference = lookup(module, f"reference_{python}")
        make_inputs = lookup(module, f"make_inputs_{python}")
        keywords = lookup(module, f"SIZE_KEYWORDS_{python}")
        sizes = request.get("sizes", {})
        if not isinstance(sizes, dict) or not all(
                isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0
                for k, v in sizes.items()):
            raise Failure("runtime_error", "`sizes` must map DT labels to non-negative integers")
        dtype_name = call.dtype_name = request.get("dtype", "float32")
        if dtype_name not in DTYPE_NAMES:
            raise Failure("runtime_error", f"`dtype` must be one of {', '.join(DTYPE_NAMES)}, "
                                           f"got {dtype_name!r}")
        dtype = getattr(torch, dtype_name)
        seed = request.get("seed", 0)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise Failure("runtime_error", "`seed` must be an integer")
        call.kwargs = {keywords[label]: size for label, size in sizes.items() if label in keywords}
        module_key = getattr(module, "__dtx_inputs_key__", None)
        key = None if module_key is None else \
            (module_key, func, json.dumps(sizes, sort_keys=True), dtype_name, seed)

        def make() -> dict[str, Any]:
            try:
                torch.manual_seed(seed)
                made = make_inputs(sizes, dtype=dtype, device=DEVICE, seed=seed)
            except (Exception, SystemExit) as e:  # noqa: BLE001
                raise classify(e, f"make_inputs_{func}") from e
            return {"inputs": made, "want": None, "reference": None}

        call.prepared = self.prepared.get(key, make)
        call.key, call.make = key, make
        return call

    def state_changed(self, call: types.SimpleNamespace) -> bool:
        """Whether the inputs and references kept for the call's request differ from when they
        were made (a kernel measured meanwhile wrote into them); if so they are forgotten, so
        that no later check compares with what a wrong kernel left."""
        prepared = call.prepared
        if "fingerprint" not in prepared or \
                fingerprint(state_tensors(prepared)) == prepared["fingerprint"]:
            return False
        self.prepared.drop(prepared)  # made anew by the next request that needs it
        return True

    def keep_state_intact(self, call: types.SimpleNamespace) -> None:
        """Before a check: state a kernel measured earlier changed (while timed without a
        check, say) is made anew, and the log says so."""
        if self.state_changed(call):
            log(f"the inputs or reference of {call.func} had changed since they were made (a "
                "kernel measured earlier wrote outside its output); made anew")
            call.prepared = self.prepared.get(call.key, call.make)

    def prefetch(self, request: object) -> None:
        """Readies the measure request that the pool will send next, while this one's times are
        taken (bench_cuda's `while_waiting`): imports its module, makes its inputs and, on a
        GPU, loads its kernels from the Triton cache, without launching any. What it spent is
        reported with that request (`prefetched`). Any failure is left for the request itself
        to meet and report."""
        if not isinstance(request, dict) or request.get("type") != "measure":
            return
        spec = request.get("module")
        sha = spec.get("sha256") if isinstance(spec, dict) else None
        if not isinstance(sha, str) or sha.lower() in self.modules.by_hash:
            return
        mark = self.compile_clock.mark()
        start = time.perf_counter()
        spent = {"import_s": 0.0}
        try:
            _, spent["import_s"] = self.modules.get(spec)
            call = self.resolve(request)
            if CUDA:
                with kernels_not_launched(call.module, load=True):
                    call.wrapper(*call.prepared["inputs"], **call.kwargs)
        except BaseException as e:  # noqa: BLE001  (whatever the module raises, even GeneratorExit)
            log(f"prefetch of request {request.get('id')!r} failed (the request will say why): "
                f"{describe(e)}")
        spent.update(self.compile_clock.since(mark))
        spent["prefetch_s"] = time.perf_counter() - start
        self.prefetched[sha.lower()] = spent
        while len(self.prefetched) > 8:  # readied for a request another worker took
            self.prefetched.pop(next(iter(self.prefetched)))

    def handle(self, request: dict[str, Any]) -> dict[str, Any] | None:
        """The result for one parsed request (a dict), or None for shutdown."""
        kind = request.get("type")
        if kind == "shutdown":
            return None
        if kind not in ("measure", "baseline", "compile"):
            raise Failure("runtime_error", f"unknown request type {kind!r} "
                                           "(measure, baseline, compile or shutdown)")
        result: dict[str, Any] = {"compile_s": 0.0, "import_s": 0.0}
        spec = request.get("module")
        early = self.prefetched.pop(spec.get("sha256", "").lower(), None) \
            if isinstance(spec, dict) and isinstance(spec.get("sha256"), str) else None
        if early is not None:
            result["prefetched"] = early
        call = self.resolve(request)
        # Imported by the prefetch, or here when the prefetch failed before importing it.
        result["import_s"] = call.import_s + (early["import_s"] if early is not None else 0.0)
        module, func, wrapper, reference = call.module, call.func, call.wrapper, call.reference
        dtype_name, kwargs, prepared = call.dtype_name, call.kwargs, call.prepared
        check = request.get("check", False)
        if not isinstance(check, bool):
            raise Failure("runtime_error", "`check` must be true or false")
        wanted = parse_times(request.get("times")) if kind != "compile" else {}
        baseline, is_reference = None, False
        if kind == "baseline":
            baseline, is_reference = self.modules.baseline(request.get("baseline"), module,
                                                           call.python)
        if kind == "compile" and CUDA:
            # A compile worker shares its GPU with a timing worker, whose times another
            # process's kernels would disturb: compile every kernel for the real arguments (the
            # same specializations, so the timing worker finds them in the shared cache) without
            # launching any.
            mark = self.compile_clock.mark()
            start = time.perf_counter()
            with kernels_not_launched(module):
                try:
                    wrapper(*prepared["inputs"], **kwargs)
                except (Exception, SystemExit) as e:  # noqa: BLE001
                    raise classify(e, f"wrapper {func}") from e
            result.update(self.compile_clock.since(mark))
            result["compile_s"] = time.perf_counter() - start
            result["status"] = "ok"
            result["message"] = "compiled without launching (the check runs in the timing worker)"
            return result
        if check:
            self.keep_state_intact(call)
            prepared = call.prepared
        inputs = clone_inputs(prepared["inputs"])

        # The baseline's own calls (the check's and the timed ones) alone, so that its host
        # time is its own.
        dot = dot_precision(module, func)
        tf32 = kind == "baseline" and dtype_name == "float32" and dot == "tf32"
        precision = tf32_products if tf32 else contextlib.nullcontext
        rtol, atol = tolerances(dtype_name, dot)
        l2_tol = l2_tolerance(dtype_name, dot)
        if kind == "baseline":
            what = "the reference" if is_reference else "the baseline"
            assert baseline is not None  # set above for a baseline request
            fn: Callable[[], Any] = (lambda: baseline(*inputs, **kwargs)) if is_reference else \
                (lambda: baseline(*inputs))
        else:
            what = f"wrapper {func}"
            fn = lambda: wrapper(*inputs, **kwargs)  # noqa: E731

        mark = self.compile_clock.mark()
        start = time.perf_counter()
        if check:
            if prepared["want"] is None:
                try:
                    prepared["want"] = reference(*clone_inputs(inputs), **kwargs)
                except (Exception, SystemExit) as e:  # noqa: BLE001
                    raise classify(e, f"reference_{func}") from e
            want = prepared["want"]
            # A wrapper of several results (store_in) returns, and its reference, a tuple.
            wants = want if isinstance(want, tuple) else (want,)
            refs = prepared.get("reference")
            if refs is None or refs[0].want is not wants[0]:
                prepared["reference"] = refs = [Reference(w) for w in wants]
                prepared["fingerprint"] = fingerprint(state_tensors(prepared))
            guarded: tuple[GuardedOutput, ...] = ()
            try:
                if kind == "baseline":
                    with precision():
                        got = fn()
                else:
                    # NaN where a kernel writes nothing shows as unwritten; the guard zones
                    # around it show what it writes past its ends.
                    guarded = tuple(GuardedOutput(w) for w in wants)
                    outs = tuple(g.out for g in guarded)
                    got = outs if isinstance(want, tuple) else outs[0]
                    wrapper(*inputs, **kwargs, out=got)
                synchronize()
            except (Exception, SystemExit) as e:  # noqa: BLE001
                raise classify(e, what) from e
            first_run_s = time.perf_counter() - start
            result["check"], message = compare_results(got, want, rtol, atol, refs)
            c = result["check"]
            c["rel_l2_tol"] = l2_tol
            if not message and c["rel_l2"] > l2_tol:
                message = (f"relative L2 error {c['rel_l2']:.3g} over the whole result exceeds "
                           f"{l2_tol:g}, though every element is within rtol {rtol}, atol "
                           f"{atol} x scale")
            outside = [g.outside() for g in guarded]
            before, after = sum(b for b, _ in outside), sum(a for _, a in outside)
            c["outside"] = before + after
            wrote = []
            if before + after:
                wrote.append(f"it wrote {before + after} elements outside its output ({before} "
                             f"before its start, {after} past its end)")
            if self.state_changed(call):
                wrote.append("it changed the worker's copies of its inputs or reference "
                             "(made anew)")
            if wrote:
                message = "; ".join(wrote + ([message] if message else []))
            if c["mismatched"] or c["unwritten"] or c["rel_l2"] > l2_tol or wrote:
                raise Failure("wrong_result", message or "the check failed", c)
        else:
            try:
                with precision():
                    fn()
                synchronize()
            except (Exception, SystemExit) as e:  # noqa: BLE001
                raise classify(e, what) from e
            first_run_s = time.perf_counter() - start
        result.update(self.compile_clock.since(mark))
        if early is not None:
            for key in ("compile_s", "compiled", "cache_hits"):
                result[key] += early[key]
        if kind == "compile":
            result["compile_s"] = first_run_s

        notes: list[str] = []
        if wanted:
            try:
                ahead = request.get("prefetch")
                with precision():
                    result["times"], result["timed_s"] = measure_times(
                        fn, wanted, notes, (lambda: self.prefetch(ahead)) if ahead else None)
            except (Exception, SystemExit) as e:  # noqa: BLE001
                raise classify(e, f"timing {what}") from e
            if check and self.state_changed(call):
                raise Failure("wrong_result", "while timed, it wrote outside its output: it "
                              "changed the worker's copies of its inputs or reference (made "
                              "anew)", result.get("check"))
        result["status"] = "ok"
        result["message"] = "; ".join(notes)
        return result


def serve(worker: Worker, protocol: Protocol) -> int:
    for raw in protocol.lines():
        start = time.perf_counter()
        request_id: str | int | None = None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            protocol.send(error_result(None, f"malformed request: not UTF-8 ({e})", start))
            continue
        if not text.strip():
            continue
        try:
            request = json.loads(text)
        except ValueError as e:
            request_id = salvage_id(text)
            protocol.send(error_result(request_id, f"malformed request: not JSON ({e})", start))
            continue
        if not isinstance(request, dict):
            protocol.send(error_result(None, "malformed request: not a JSON object", start))
            continue
        request_id = request.get("id")
        if isinstance(request_id, bool) or not isinstance(request_id, (str, int)):
            request_id = None
        lost = False
        try:
            result = worker.handle(request)
            if result is None:
                log("shutdown requested")
                return 0
        except Failure as f:
            result = {"status": f.status, "message": f.message}
            if f.check is not None:
                result["check"] = f.check
            lost = f.status == "runtime_error" and f.__cause__ is not None \
                and cuda_context_lost(f.__cause__)
            if f.__cause__ is not None:
                log("request", request_id, "failed:\n" + "".join(
                    traceback.format_exception(f.__cause__)))
        except (Exception, SystemExit) as e:  # noqa: BLE001  (a bug here must cost one request, not the worker)
            log("request", request_id, "failed in the worker:\n" + traceback.format_exc())
            result = {"status": "runtime_error", "message": f"worker error: {describe(e)}"}
            lost = cuda_context_lost(e)
        if lost:
            result["message"] += " (CUDA context lost: the worker exits)"
        protocol.send(finish(request_id, result, start))
        if worker.profile is not None:
            worker.profile.save()
        if lost:
            log(f"CUDA error; exiting with {EXIT_CUDA_ERROR}")
            worker.modules.close()
            os._exit(EXIT_CUDA_ERROR)
    log("end of input")
    return 0


def salvage_id(text: str) -> str | int | None:
    match = re.search(r'"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+)', text)
    if not match:
        return None
    try:
        return cast("str | int", json.loads(match.group(1)))  # a string or an integer
    except ValueError:
        return None


def error_result(request_id: str | int | None, message: str, start: float) -> dict[str, Any]:
    return finish(request_id, {"status": "runtime_error", "message": one_line(message)}, start)


def finish(request_id: str | int | None, result: dict[str, Any],
           start: float) -> dict[str, Any]:
    message: dict[str, Any] = {"type": "result", "id": request_id, "status": result["status"],
                               "message": one_line(result.get("message", ""))}
    for key in ("check", "times", "prefetched"):
        if key in result:
            message[key] = result[key]
    message["compile_s"] = result.get("compile_s", 0.0)
    message["compiled"] = result.get("compiled", 0)
    message["cache_hits"] = result.get("cache_hits", 0)
    message["import_s"] = result.get("import_s", 0.0)
    message["timed_s"] = result.get("timed_s", 0.0)
    message["wall_s"] = time.perf_counter() - start
    return message


def main(argv: list[str] | None = None) -> int:
    global torch, triton, CUDA, DEVICE
    parser = argparse.ArgumentParser(description="dtx measurement worker (protocol version 1, "
                                                 "docs/worker-protocol.md)")
    parser.add_argument("--role", choices=("timing", "compile"), default="timing")
    parser.add_argument("--device-index", type=int, default=0,
                        help="CUDA device index among the visible devices (default 0)")
    parser.add_argument("--protocol", type=int, default=PROTOCOL,
                        help=f"the protocol version the caller speaks (this worker: {PROTOCOL})")
    args = parser.parse_args(argv)
    if args.protocol != PROTOCOL:
        # A binary of another version than this package: refused before anything is exchanged.
        log(f"the caller speaks protocol {args.protocol}, this worker ({__file__}) speaks "
            f"{PROTOCOL}: install the dtx package and the binaries of one version "
            "(deploy/setup.sh)")
        return 2

    protocol = Protocol()
    sys.dont_write_bytecode = True  # each generated module is imported once: no .pyc to write
    import torch as torch_module
    torch = torch_module
    CUDA = torch.cuda.is_available()
    if CUDA:
        if not 0 <= args.device_index < torch.cuda.device_count():
            log(f"--device-index {args.device_index}: only {torch.cuda.device_count()} visible "
                "CUDA device(s)")
            return 2
        DEVICE = torch.device("cuda", args.device_index)
        torch.cuda.set_device(DEVICE)
    else:
        if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1":
            log("triton was imported before TRITON_INTERPRET=1 could be set")
            return 2
        os.environ["TRITON_INTERPRET"] = "1"
        DEVICE = torch.device("cpu")
    import triton as triton_module
    import triton.testing  # noqa: F401
    triton = triton_module

    worker = Worker(args.role)
    protocol.send({"type": "hello", "protocol": PROTOCOL, "role": args.role, "pid": os.getpid(),
                   "python": platform.python_version(), "torch": torch.__version__,
                   "triton": triton.__version__, "device": device_info(), "comparable": CUDA,
                   "host": platform.node(), "gpu": gpu_index(args.device_index)})
    if os.environ.get("DTX_WORKER_PROFILE"):
        worker.profile = Profile(pathlib.Path(os.environ["DTX_WORKER_PROFILE"]) /
                                 f"{args.role}-{os.getpid()}.prof")
    try:
        return serve(worker, protocol)
    finally:
        worker.modules.close()


if __name__ == "__main__":
    sys.exit(main())
