"""Helion's kernels as baselines: the `helion` entry of a template's `baselines`.

One function per template, named as the template's `kernel:` field, taking the positional
arguments of the generated module's `make_inputs` (as `baselines.py` does) and returning what the
DT program computes, through a Helion kernel written the way Helion's documentation writes it: a
loop over tiles of rows (`hl.tile`) whose body is PyTorch on the whole row, the statistics in
float32. Helion chooses everything else (row block, reduction loop or whole row, pointers, block
pointers or tensor descriptors, persistent or one program per tile, warps, stages) by its own
autotuner, the first time a kernel meets a shape and dtype. Written against helion 1.4.0.

Tuning: Helion's full search takes minutes a kernel, more than a worker gives a baseline. Tune
ahead, once per machine and shape, with `tests/gpu/helion_tune.py` (it runs the same functions on
the same inputs with Helion's `full` effort and keeps the best configuration in Helion's cache,
`HELION_CACHE_DIR`); the worker's call then finds it there. A call that finds nothing cached
tunes with the effort `HELION_AUTOTUNE_EFFORT` names, `quick` when it is unset: a weaker peer,
and Helion prints that it tuned.

Helion is optional: this file imports without it, and each function raises
`ModuleNotFoundError("helion is not installed ...")` when it is called where the package is
missing, so an exploration reports its `helion` baseline as failed with that message and goes on
with the others and the candidates.
"""
import functools
import importlib
import importlib.util
import pathlib

NOT_INSTALLED = "helion is not installed (pip install helion): the helion baseline needs it"


def _helion():
    """The modules helion and helion.language, or the not-installed error."""
    try:
        return importlib.import_module("helion"), importlib.import_module("helion.language")
    except ModuleNotFoundError as e:
        if e.name is not None and e.name.split(".")[0] == "helion":
            raise ModuleNotFoundError(NOT_INSTALLED, name="helion") from None
        raise


@functools.cache
def _kernels():
    """The Helion kernels of `helion_kernels.py` beside this file, imported on the first call
    (Helion reads a kernel's source and refuses closures: they live in a module of their own,
    which imports Helion at its top)."""
    _helion()
    path = pathlib.Path(__file__).with_name("helion_kernels.py")
    spec = importlib.util.spec_from_file_location("dtx_helion_kernels", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------------------------------------
# Row reductions.

def rmsnorm(X, W, Eps, Offset):
    """X * rsqrt(mean(X^2) + Eps) * (Offset + W), each row's statistics in float32."""
    return _kernels().rmsnorm(X, W, float(Eps), float(Offset))


def layernorm(X, W, B, eps):
    """(X - mean) * rsqrt(var + eps) * W + B over each row of X [rows, hidden], the variance the
    mean of the squared deviations (two passes over the row's values, as the DT program)."""
    return _kernels().layernorm(X, W, B, float(eps))


def softmax(A):
    """Softmax over each row (with the row maximum subtracted; the same values as the thesis'
    program, which omits it, for inputs of moderate size)."""
    return _kernels().softmax(A)
