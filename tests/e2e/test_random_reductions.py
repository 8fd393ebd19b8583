"""Random schedules (block, tensorize, map, fuse_at, split and atomic reductions, launch
parameters) for the reduction and fusion conformance programs, run under the Triton
interpreter against each module's PyTorch reference and the hand-written oracle of the program
(tests/oracles.py)."""
import random
import zlib

import pytest
import torch

from conftest import CONFORMANCE, check_module, load_module, run_dtc
from oracles import ORACLES
from schedule_gen import ALGORITHMS, random_schedule, random_sizes

FLOAT32_PER_ALGORITHM = 100
FLOAT16_PER_ALGORITHM = 20


def accepted_schedules(name, count, seed, tmp_path):
    """Compiles random schedules until `count` are accepted; returns (module, schedule, sizes)."""
    rng = random.Random(seed)
    source = CONFORMANCE / f"{name}.dt"
    out, rejected = [], 0
    while len(out) < count:
        schedule = random_schedule(name, rng)
        target = tmp_path / f"{name}_{len(out)}_{rejected}.py"
        result = run_dtc(source, "-o", target, "--schedule", schedule)
        if result.returncode != 0:
            assert "error:" in result.stderr and "internal error" not in result.stderr, result.stderr
            rejected += 1
            assert rejected < 20 * count, f"generator too wild: {result.stderr}"
            continue
        out.append((target, schedule, random_sizes(name, rng)))
    return out, rejected


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["float32", "float16"])
def test_random_schedules_match_reference(name, dtype, tmp_path):
    count = FLOAT32_PER_ALGORITHM if dtype == torch.float32 else FLOAT16_PER_ALGORITHM
    schedules, rejected = accepted_schedules(name, count, zlib.crc32(f"{name}-{dtype}".encode()), tmp_path)
    for i, (path, schedule, sizes) in enumerate(schedules):
        module = load_module(path)
        try:
            check_module(module, sizes, dtype, seed=i, oracle=ORACLES[name])
        except Exception as error:  # name the schedule that failed
            raise AssertionError(f"schedule {schedule!r} at {sizes}: {error}") from error
        # The canonical text is a fixed point: compiling it again gives the same text.
        again = run_dtc(CONFORMANCE / f"{name}.dt", "--canonical", "--schedule", module.SCHEDULE)
        assert again.returncode == 0 and again.stdout.strip() == module.SCHEDULE, again.stderr
