"""Stored explorations with GPU-like timings, written into a dtxd's store as another process
(`dtx explore` on a GPU machine) writes into a shared one: the schedules are those `dtx expand`
lists for a real template (canonical text and index in the space), each given recorded-looking
times of an H100 by a model of the kind the thesis measures (the tile shape decides, the k step
barely matters, a little noise), a few failures of the kinds a GPU gives, the screening protocol
for all and the full protocol for the fastest, and baselines under both protocols."""
import hashlib
import json
import math
import pathlib
import random
import re
import sqlite3
import subprocess
import tempfile

from dtxd import ROOT

DTX = ROOT / "build" / "explorer" / "dtx"
ENV = ("NVIDIA H100 80GB HBM3", "cuda", "550.54.15", "12.4", "2.13.0+cu124", "3.6.0", "gpu-node-3")

MATMUL_TEMPLATE = """\
$BM = {16..256};
$BN = {16..256};
matmul.block(m:$BM, n:$BN);
matmul.tensorize(m:0, n:0, k:{16..128});
matmul.map({(n, m), (m, n), (m:mi/8, n, mi)});
matmul.num_warps({2..8});
where $BM * $BN >= 1024 and $BM * $BN <= 32768;
where matmul.num_warps * 256 <= $BM * $BN;
"""

# 50,000 and more distinct schedules of the same algorithm.
LARGE_TEMPLATE = """\
$BM = {16..1024};
$BN = {16..1024};
matmul.block(m:$BM, n:$BN);
matmul.tensorize(m:0, n:0, k:{16..256});
matmul.map({(n, m), (m, n), (m:mi/8, n, mi), (n:ni/8, m, ni)});
matmul.num_warps({1..16});
matmul.num_stages({1..8:+1});
matmul.index({auto, int64});
"""


def expand(template, shape, dtype="float16", limit=0):
    """[(index, canonical)] of `dtx expand --list --json` for matmul.dt with this template."""
    with tempfile.TemporaryDirectory() as tmp:
        yaml = pathlib.Path(tmp) / "t.yaml"
        (pathlib.Path(tmp) / "matmul.dt").write_text((ROOT / "templates" / "matmul.dt").read_text())
        yaml.write_text("kernel: matmul\nalgorithm: matmul.dt\ncompile: [matmul]\nschedule: |\n" +
                        "".join("  " + line + "\n" for line in template.splitlines()) +
                        f"dtype: {dtype}\n")
        shape_arg = ",".join(f"{k}={v}" for k, v in shape.items())
        out = subprocess.run([str(DTX), "expand", str(yaml), "--shape", shape_arg, "--list", "--json",
                              "--threads", "2"] + (["--limit", str(limit)] if limit else []),
                             check=True, capture_output=True, text=True, timeout=600).stdout
    j = json.loads(out)
    return [(s["index"], s["canonical"]) for s in j["schedules"] if s.get("ok")]


def variables_of(canonical):
    """The tile, k step, warps, stages and launch order as the schedule text states them (a
    primitive left at its default is absent from canonical text: the defaults)."""
    def num(pattern, default):
        m = re.search(pattern, canonical)
        return int(m.group(1)) if m else default
    mp = re.search(r"\.map\(([^)]*)\)", canonical)
    return {"bm": num(r"block\([^)]*m:(\d+)", 0), "bn": num(r"block\([^)]*n:(\d+)", 0),
            "k": num(r"tensorize\([^)]*k:(\d+)", 0), "warps": num(r"num_warps\((\d+)\)", 4),
            "stages": num(r"num_stages\((\d+)\)", 3), "map": mp.group(1) if mp else "default"}


def gpu_time(v, rng, scale=1.0):
    """An H100-like time in ms of a 4096^3 float16 product: tiles of 128x128 and 128x256 are
    fastest, small tiles several times slower; the k step changes little; warps a little."""
    area = max(v["bm"] * v["bn"], 256)
    shape = 1.0 + 2.2 * abs(math.log2(area / 16384)) ** 1.6 / 4 + 0.15 * abs(math.log2(max(v["bm"], 1) / max(v["bn"], 1)))
    kstep = 1.0 + 0.01 * abs(math.log2(max(v["k"], 16) / 64))
    warps = 1.0 + 0.04 * abs(math.log2(v["warps"] / 4))
    order = 0.97 if "mi/8" in v["map"] or "ni/8" in v["map"] else 1.0
    return 0.21 * scale * shape * kstep * warps * order * (1 + rng.gauss(0, 0.01))


class Store:
    def __init__(self, db):
        self.db = sqlite3.connect(str(db), timeout=30)
        self.db.execute("PRAGMA busy_timeout = 30000")

    def _text_id(self, table, column, text):
        sha = hashlib.sha256(text.encode()).hexdigest()
        self.db.execute(f"INSERT OR IGNORE INTO {table} (sha256, {column}) VALUES (?, ?)", (sha, text))
        return self.db.execute(f"SELECT id FROM {table} WHERE sha256 = ?", (sha,)).fetchone()[0]

    def _measurement(self, schedule_id, code_hash, shape, dtype, protocol, status, message, t, rng, created):
        ranking = t * (1 + rng.gauss(0, 0.02)) if t else None
        bench = (t, t * 0.985, t * 1.02, t * 0.97, t * 1.08, 100) if t else (None,) * 6
        gpu = (t * 0.93, t * 0.92, t * 0.95, t * 0.91, t * 0.99, 100) if t else (None,) * 6
        cur = self.db.execute(
            "INSERT INTO measurements (schedule_id, code_hash, shape, dtype, protocol, status, message,"
            " bench_median_ms, bench_q20_ms, bench_q80_ms, bench_min_ms, bench_max_ms, bench_samples,"
            " gpu_median_ms, gpu_q20_ms, gpu_q80_ms, gpu_min_ms, gpu_max_ms, gpu_samples,"
            " time_ms, time_stdev_ms, rounds, compile_s, device_name, device_kind, driver, cuda, torch,"
            " triton, host, created_at) VALUES (?,?,?,?,?,?,?, ?,?,?,?,?,?, ?,?,?,?,?,?, ?,?,?,?, ?,?,?,?,?,?,?,?)",
            (schedule_id, code_hash, shape, dtype, protocol, status, message, *bench, *gpu,
             # The ranking time: the mean of the rounds' medians, near the median but not it.
             ranking, (t * 0.01 if t else None),
             5 if protocol == "full" else 1, 1.2, *ENV, created))
        return cur.lastrowid, ranking

    def module(self, schedule_id, source):
        """Gives a stored schedule its generated module (as the explorer stores it)."""
        code_hash = hashlib.sha256(source.encode()).hexdigest()
        with self.db:
            self.db.execute("INSERT OR IGNORE INTO modules (code_hash, source) VALUES (?, ?)", (code_hash, source))
            self.db.execute("UPDATE schedules SET code_hash = ? WHERE id = ?", (code_hash, schedule_id))
            self.db.execute("UPDATE measurements SET code_hash = ? WHERE schedule_id = ?", (code_hash, schedule_id))

    def exploration(self, kernel, shape, dtype, template, schedules, *, full_top=10, fail_every=0,
                    seed=1, scale=1.0, baselines=(("torch", 1.0), ("torch.compile", 0.93)),
                    baseline_full=True):
        """Stores a done exploration of `schedules` ([(index, canonical)]); returns its id and
        {schedule id: {"screen": ms, "full": ms, "status": ..., "vars": ...}}."""
        rng = random.Random(seed)
        shape_key = ",".join(f"{k}={v}" for k, v in sorted(shape.items()))
        algorithm = (ROOT / "templates" / "matmul.dt").read_text()
        with self.db:
            alg = self._text_id("algorithms", "source", algorithm)
            tpl = self._text_id("templates", "text", template)
            settings = {"budget": 0, "top": full_top, "algorithm_name": "matmul.dt",
                        "baselines": [{"name": n} for n, _ in baselines]}
            x = self.db.execute(
                "INSERT INTO explorations (kernel, algorithm_id, template_id, shape, dtype, strategy,"
                " settings_json, state, space_size, candidates, device_name)"
                " VALUES (?, ?, ?, ?, ?, 'exhaustive', ?, 'done', ?, ?, ?)",
                (kernel, alg, tpl, shape_key, dtype, json.dumps(settings), len(schedules) * 3,
                 len(schedules), ENV[0])).lastrowid
            truth = {}
            ok = []
            clock = 0
            order = list(schedules)
            rng.shuffle(order)  # measured in the search's order, not the space's
            for n, (index, canonical) in enumerate(order):
                code_hash = hashlib.sha256(f"{x}:{canonical}".encode()).hexdigest()
                sid = self.db.execute(
                    "INSERT INTO schedules (exploration_id, canonical, candidate_index) VALUES (?, ?, ?)",
                    (x, canonical, index)).lastrowid
                v = variables_of(canonical)
                clock += 1
                created = f"2026-11-{20 + clock // 86400:02d}T{clock // 3600 % 24:02d}:{clock // 60 % 60:02d}:{clock % 60:02d}Z"
                if fail_every and n % fail_every == fail_every - 1:
                    need = v["bm"] * v["bn"] * 2 * v["stages"] * 4 + 1024 * (n % 7)
                    status, message = (("out_of_resources", f"out of resource: shared memory, Required: {need}, Hardware limit: 232448. Reducing block sizes or `num_stages` may help.")
                                       if n % 2 else ("runtime_error", f"CUDA error: an illegal memory access was encountered at offset {n * 64}"))
                    mid, _ = self._measurement(sid, code_hash, shape_key, dtype, "screen", status, message, None, rng, created)
                    truth[sid] = {"screen": None, "full": None, "status": status, "vars": v, "message": message, "measurement": mid}
                    continue
                mid, t = self._measurement(sid, code_hash, shape_key, dtype, "screen", "ok", "", gpu_time(v, rng, scale), rng, created)
                truth[sid] = {"screen": t, "full": None, "status": "ok", "vars": v, "measurement": mid}
                ok.append((t, sid))
            ok.sort()
            for t, sid in ok[:full_top]:
                # The full protocol: warmer caches, longer runs: a few percent off the screening
                # time, in either direction, so that its order differs from screening's.
                code_hash = hashlib.sha256(f"{x}:{sid}".encode()).hexdigest()
                _, f = self._measurement(sid, code_hash, shape_key, dtype, "full", "ok", "", t * (1 + rng.uniform(-0.06, 0.06)), rng, "2026-11-20T11:00:00Z")
                truth[sid]["full"] = f
            best_screen = ok[0][0] if ok else 1.0
            for name, factor in baselines:
                for protocol in (("screen", "full") if baseline_full else ("screen",)):
                    t = best_screen * factor * (1.08 if protocol == "screen" else 1.0)
                    mid, _ = self._measurement(None, "", shape_key, dtype, protocol, "ok", "", t, rng, "2026-11-20T09:00:00Z")
                    self.db.execute("INSERT INTO baselines (exploration_id, name, measurement_id) VALUES (?, ?, ?)",
                                    (x, name, mid))
            # Each schedule's latest measurement per protocol and its ranking key: the store's
            # rule (results/src/Schema.cpp, migrations 2 and 3; SqliteStore's add_measurement).
            self.db.execute(
                "UPDATE schedules SET"
                " screen_id = (SELECT MAX(id) FROM measurements WHERE schedule_id = schedules.id AND protocol = 'screen'),"
                " full_id = (SELECT MAX(id) FROM measurements WHERE schedule_id = schedules.id AND protocol = 'full')"
                " WHERE exploration_id = ?", (x,))
            self.db.execute(
                "UPDATE schedules SET (rank_group, rank_ms, rank_tier) = (SELECT"
                " CASE WHEN m.id IS NULL THEN 2 WHEN m.status = 'ok' AND m.time_ms IS NOT NULL THEN 0 ELSE 1 END,"
                " CASE WHEN m.status = 'ok' THEN m.time_ms END,"
                " CASE WHEN m.status = 'ok' AND m.time_ms IS NOT NULL AND schedules.full_id IS NULL THEN 1 ELSE 0 END"
                " FROM (SELECT 1) LEFT JOIN measurements m ON m.id = COALESCE(schedules.full_id, schedules.screen_id))"
                " WHERE exploration_id = ?", (x,))
        return x, truth


def compile_module(program):
    """The generated Triton module of a DT program (the compiler, `dtc`)."""
    with tempfile.TemporaryDirectory() as tmp:
        src, out = pathlib.Path(tmp) / "matmul.dt", pathlib.Path(tmp) / "matmul.py"
        src.write_text(program)
        subprocess.run([str(ROOT / "build" / "compiler" / "dtc"), str(src), "-o", str(out)],
                       check=True, capture_output=True, timeout=120)
        return out.read_text()

