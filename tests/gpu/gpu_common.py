"""Helpers the GPU scripts beside this file share (they run as `python3 tests/gpu/NAME.py`, so
this directory is on their import path)."""
import importlib.util
import pathlib
import subprocess
import time

import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]


def load(path, name=None):
    """Imports the Python file at `path` (a generated module, templates/baselines.py) under
    `name` (default: the file's stem; two files of one stem need two names)."""
    spec = importlib.util.spec_from_file_location(name or pathlib.Path(path).stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def dtc(template, schedule, path):
    """Prints templates/`template`.dt with `schedule` into the module `path` (the dtc built in
    build/, on the machine that prepares a probe's modules) and returns the module's text."""
    subprocess.run([str(ROOT / "build" / "compiler" / "dtc"),
                    str(ROOT / "templates" / f"{template}.dt"), "-o", str(path),
                    "--schedule", schedule], check=True)
    return pathlib.Path(path).read_text()


def per_call_us(fn, calls):
    """µs per call of `fn` over `calls` calls back to back (queued without synchronizing, as a
    model makes them), the GPU's work included by one synchronization at the end."""
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e6
