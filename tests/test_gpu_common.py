"""tests/gpu/gpu_common.checked, which the GPU probes run their configurations through before
timing them: a configuration that raises, or that hangs (a deadlocked kernel), costs that
configuration alone, and the others are still run and reported, in order."""
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent / "gpu"))

from gpu_common import checked  # noqa: E402


def run_configs(configs, report, scale):
    """A probe's child: 2 raises, 4 hangs, the others report x * scale."""
    for config in configs:
        with report(config):
            if config["x"] == 2:
                raise ValueError("two is refused")
            if config["x"] == 4:
                time.sleep(600)
            report.result = config["x"] * scale


def test_a_failing_or_hanging_configuration_costs_itself_alone():
    start = time.monotonic()
    results = checked(run_configs, [{"x": i} for i in range(6)], 10, limit_s=3)
    assert results == [
        ({"x": 0}, ("ok", 0)), ({"x": 1}, ("ok", 10)),
        ({"x": 2}, ("error", "ValueError: two is refused")), ({"x": 3}, ("ok", 30)),
        ({"x": 4}, ("hung", "no answer within 3 s")), ({"x": 5}, ("ok", 50)),
    ]
    assert time.monotonic() - start < 120  # the hung child was killed, not waited for
