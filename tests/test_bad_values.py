"""No crash on a value a user types: every option of dtc, of each dtx subcommand and of dtxd,
and every key of dtxd's configuration file, given a bad value, is refused with a message that
names it and exit status 2, never an abort or another signal. The options are read from each
command's --help and the keys from server/src/Config.cpp, so a new one needs a bad value here."""
import os
import pathlib
import re
import subprocess

import pytest

from conftest import DTC, ROOT
from dtxd import DTXD

DTX = pathlib.Path(os.environ.get("DTX", ROOT / "build" / "explorer" / "dtx"))
TEMPLATE = ROOT / "templates" / "geglu.yaml"
PROGRAM = ROOT / "templates" / "geglu.dt"
MISSING = "/nonexistent/dir/x"

# The worker-pool options of `dtx measure` and `dtx explore`.
POOL = {
    "--compile-workers": "300", "--gpus": "x", "--startup-timeout": "0",
    "--python": MISSING, "--worker": MISSING, "--verbose": "=maybe", "--no-prefetch": "=maybe",
    "--backend": "slurm", "--ray-address": "", "--ray-interpreter-workers": "-1",
    "--ray-compile-per-node": "2000",
}
REMOTE = {"--server": "foo", "--token": "a b"}

# command -> (arguments that make the rest valid, {option: bad value}). A positional is named
# as --help names it; `=VALUE` is given as `--flag=VALUE`.
COMMANDS = {
    "dtc": ([PROGRAM], {
        "FILE": MISSING, "--output": MISSING + "/out.py", "--check": "=maybe",
        "--canonical": "=maybe", "--emit": "asm", "--dump-after": "parse",
    }),
    "dtx measure": ([PROGRAM, "--shape", "x=4,y=64", "--gpus", "none"], {
        "FILE": MISSING, "--shape": "x=q", "--dtype": "float64", "--schedules": MISSING,
        "--module": MISSING, "--baseline": "nofile.py:f", "--func": "nope", "--times": "wall",
        "--rank-by": "wall", "--protocol": "fast", "--rounds": "0", "--order-seed": "-1",
        "--seed": "-1", "--warmup": "nan", "--rep": "0", "--host-calls": "0",
        "--json": "=maybe", "--timeout": "inf", **POOL, "--gpus": "0,0",
    }),
    "dtx expand": ([TEMPLATE], {
        "TEMPLATE": MISSING, "--shape": "x=4,y=-1", "--count": "=maybe", "--list": "=maybe",
        "--rejected": "=maybe", "--limit": "-1", "--json": "=maybe", "--threads": "100000",
    }),
    "dtx explore": ([TEMPLATE, "--gpus", "none"], {
        "TEMPLATE": MISSING, "--shape": "x=4", "--test-shapes": "=maybe",
        "--strategy": "annealing", "--budget": "-5", "--time": "nan", "--seed": "-1",
        "--top": "1001", "--rounds": "0", "--screen-warmup": "-1", "--screen-rep": "0",
        "--full-warmup": "inf", "--full-rep": "nan", "--times": "wall", "--timeout": "0",
        "--in-flight": "-1", "--device": "", "--db": MISSING + "/x.db", "--resume": "0",
        "--json": "=maybe", **POOL, "--gpus": "x", **REMOTE,
    }),
    "dtx results": ([], {
        "EXPLORATION": "0", "--db": MISSING, "--kernel": "", "--state": "sleeping",
        "--limit": "-5", "--json": "=maybe", **REMOTE,
    }),
    "dtx best": (["geglu", "--shape", "x=4,y=64"], {
        "KERNEL": "../../tmp/evil $(id)", "--shape": "x", "--dtype": "float64", "--device": "",
        "--output": MISSING + "/out.py", "--db": MISSING, "--json": "=maybe", **REMOTE,
    }),
    "dtxd": (["--port", "0", "--no-example"], {
        "--config": MISSING, "--bind": "nowhere.invalid", "--port": "70000", "--data-dir": "",
        "--db": MISSING + "/x.db", "--templates-dir": MISSING, "--web-dir": MISSING,
        "--compile-workers": "-1", "--gpus": "x", "--python": MISSING, "--backend": "slurm",
        "--ray-address": "", "--ray-interpreter-workers": "-1", "--max-running": "0",
        "--token": "", "--log-format": "xml", "--log-level": "loud", "--protect-reads": "=maybe",
        "--no-example": "=maybe", "--lease-s": "0.5",
    }),
}
POSITIONAL = {"dtc": PROGRAM, "dtx measure": PROGRAM, "dtx expand": TEMPLATE,
              "dtx explore": TEMPLATE, "dtx best": "geglu"}
# Not a usage error by design: a schedule the compiler rejects is the program's error, reported
# at its line (dtc: exit status 1) or a measurement's result (dtx measure: a `rejected` row).
SCHEDULE_TEXT = {"dtc", "dtx measure"}


def binary(command):
    name, *sub = command.split()
    path = {"dtc": DTC, "dtx": DTX, "dtxd": DTXD}[name]
    if not path.exists():
        pytest.fail(f"{path} is not built; run deploy/setup.sh")
    return [str(path), *sub]


def options_of(command):
    """The options and positionals --help lists (long names; not --help)."""
    text = subprocess.run([*binary(command), "--help"], capture_output=True, text=True,
                          timeout=60).stdout
    found = set()
    for line in text.splitlines():
        m = re.match(r"  (?:-\w,)?(--[\w-]+)|  ([A-Z][A-Z0-9_]*) ", line)
        if m and m.group(1) != "--help":
            found.add(m.group(1) or m.group(2))
    return found


def run(command, args, tmp_path):
    # No GPU: nothing a refused value leads to may start one (dtxd: a value accepted by
    # mistake serves until the timeout).
    return subprocess.run([*binary(command), *map(str, args)], capture_output=True, text=True,
                          timeout=30 if command == "dtxd" else 120, cwd=tmp_path,
                          env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})


def refusal_problem(r, name, what):
    """Why `r` is not a clean refusal naming `name` ("" when it is)."""
    if r.returncode < 0 or "terminate called" in r.stderr or "core dumped" in r.stderr:
        return f"{what}: killed by signal {-r.returncode}\n{r.stderr}"
    if r.returncode != 2:
        return f"{what}: exit status {r.returncode}, not 2\n{r.stderr}"
    if not re.search(name, r.stderr):
        return f"{what}: the message does not name it\n{r.stderr}"
    return ""


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_bad_value_of_every_option_is_refused_and_named(command, tmp_path):
    valid, bad = COMMANDS[command]
    listed = options_of(command) - ({"--schedule"} if command in SCHEDULE_TEXT else set())
    assert listed == set(bad), "the options --help lists and those with a bad value here differ"
    problems = []
    for option, value in bad.items():
        args = list(valid)
        if option.isupper():  # a positional: in place of the valid one, or first
            given = POSITIONAL.get(command)
            args = [value if a == given else a for a in args] if given else [value, *args]
        else:
            if option in args:  # the valid value of the same option makes way
                i = args.index(option)
                del args[i:i + 2]
            args += [option + value] if value.startswith("=") else [option, value]
        r = run(command, args, tmp_path)
        problems.append(refusal_problem(r, re.escape(option), f"{command} {option} {value!r}"))
    if command == "dtc":  # --schedule: the program's error, at its line, no crash
        r = run(command, [PROGRAM, "--schedule", "geglu.block(x:-5)"], tmp_path)
        if r.returncode != 1 or "<schedule>:1:" not in r.stderr:
            problems.append(f"dtc --schedule: exit status {r.returncode}\n{r.stderr}")
    problems = [p for p in problems if p]
    assert not problems, "\n\n".join(problems)


def test_gpus_none_means_the_interpreter(tmp_path):
    # dtx: no GPU, so the file's test shapes, and past the checks to the (missing) server.
    r = run("dtx explore", [TEMPLATE, "--gpus", "none", "--server", "http://127.0.0.1:1",
                            "--db", tmp_path / "x.db"], tmp_path)
    assert r.returncode == 1 and "no GPU: exploring the template's test_shapes" in r.stderr
    assert "cannot reach dtxd" in r.stderr, r.stderr
    # dtxd: as docs/server.md says.
    # Its log in a file, not a pipe: waiting for a pipe's end also waits for every process that
    # inherited it, and on CI's two loaded cores that once outlasted dtxd's own stop by minutes
    # (the log said "stopped in 0.11 s"), which is not this test's subject.
    log = tmp_path / "dtxd.log"
    with open(log, "w") as err_file:
        proc = subprocess.Popen([*binary("dtxd"), "--port", "0", "--no-example", "--gpus", "none",
                                 "--data-dir", str(tmp_path / "d")], stdout=subprocess.PIPE,
                                stderr=err_file, text=True)
    try:
        line = proc.stdout.readline()
        assert re.search(r"http://127\.0\.0\.1:\d+/", line), log.read_text()
    finally:
        proc.terminate()
        # Its workers may still be importing torch on a loaded machine: a stop there once took
        # over 60 s, which is a slow stop, not this test's subject.
        proc.wait(timeout=240)
        proc.stdout.close()
    err = log.read_text()
    assert proc.returncode == 0, err
    assert "on the Triton interpreter (no GPU)" in err


# dtxd's configuration file: each key with a bad value.
CONFIG = {
    "bind": "bind: nowhere.invalid", "port": "port: 1e9", "data_dir": "data_dir: /dev/null/x",
    "db": f"db: {MISSING}/x.db", "templates_dir": f"templates_dir: {MISSING}",
    "web_dir": f"web_dir: {MISSING}", "vendor_dir": f"vendor_dir: {MISSING}",
    "compile_workers": "compile_workers: -3", "gpus": "gpus: [-1]",
    "python": f"python: {MISSING}", "worker": f"worker: {MISSING}",
    "max_running": "max_running: 0", "max_body": "max_body: -1",
    "tokens": "tokens: ['']", "log_format": "log_format: xml", "log_level": "log_level: loud",
    "example": "example: maybe", "max_connections": "max_connections: 0",
    "max_event_streams": "max_event_streams: 100000000", "request_timeout_s": "request_timeout_s: 0",
    "expand_time_s": "expand_time_s: forever",
    "protect_reads": "protect_reads: maybe", "backend": "backend: slurm",
    "ray": "ray: 5", "explore": "explore: [1]", "lease_s": "lease_s: .nan",
    "hosts": "hosts: dtx.internal",
}
RAY = {"address": "ray: {address: ''}", "interpreter_workers": "ray: {interpreter_workers: -1}",
       "compile_per_node": "ray: {compile_per_node: -7}"}
EXPLORE = {
    "strategy": "annealing", "budget": "-1", "time_limit_s": ".inf", "seed": "1.5", "top": "-4",
    "rounds": "0", "screen_warmup_ms": "-1", "screen_rep_ms": ".nan", "full_warmup_ms": ".inf",
    "full_rep_ms": "0", "timeout_s": "0", "device": "x" * 201, "times": "[bench, wall]",
}


def explore_keys(tmp_path):
    """The `explore:` keys, as dtxd lists them refusing one it does not know (the settings
    described in explorer/src/Settings.cpp that a request may leave out)."""
    (tmp_path / "dtxd.yaml").write_text("explore: {colour: 1}\n")
    r = run("dtxd", ["-c", tmp_path / "dtxd.yaml", "--port", "0", "--no-example",
                     "--data-dir", tmp_path / "data"], tmp_path)
    m = re.search(r"unknown `explore` setting `colour` \(the settings are ([\w, ]+)\)", r.stderr)
    assert r.returncode == 2 and m, r.stderr
    return set(m.group(1).split(", "))


def config_keys(tmp_path):
    source = (ROOT / "server" / "src" / "Config.cpp").read_text()
    keys = set(re.findall(r'\(k == "(\w+)"\)', source))
    return keys, set(re.findall(r'rk == "(\w+)"', source)), explore_keys(tmp_path)


def test_a_bad_value_of_every_configuration_key_is_refused_and_named(tmp_path):
    keys, ray, explore = config_keys(tmp_path)
    assert (keys, ray, explore) == (set(CONFIG), set(RAY), set(EXPLORE)), \
        "the keys Config.cpp reads and those with a bad value here differ"
    cases = ([(k, k, v) for k, v in CONFIG.items()] +
             [(k, f"ray.{k}", v) for k, v in RAY.items()] +
             [(k, f"explore.{k}", f"explore: {{{k}: {v}}}") for k, v in EXPLORE.items()])
    problems = []
    for key, where, text in cases:
        (tmp_path / "dtxd.yaml").write_text(text + "\n")
        args = ["-c", tmp_path / "dtxd.yaml", "--port", "0", "--no-example"]
        if key != "data_dir":
            args += ["--data-dir", tmp_path / "data"]
        r = run("dtxd", args, tmp_path)
        problems.append(refusal_problem(r, rf"`{key}`|\({key}\)", f"{where} ({text})"))
    problems = [p for p in problems if p]
    assert not problems, "\n\n".join(problems)
