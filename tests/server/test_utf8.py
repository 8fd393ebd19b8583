"""Text cut inside a multi-byte character never reaches JSON or the store: a compile error on a
long line of non-ASCII text (the diagnostic shows a window of the line), and a worker that dies
with 10 KB of `é` on its standard error (the pool keeps a 4 KiB tail). Both used to make
nlohmann::json throw: /v1/compile answered 500, and after one exploration stored such a tail,
every `GET /v1/explorations` and `dtx results --json` of that store failed."""
import json
import os
import pathlib
import shutil
import subprocess

from conftest import ROOT
from dtxd import Daemon

DTX = pathlib.Path(os.environ.get("DTX", ROOT / "build" / "explorer" / "dtx"))


def test_a_diagnostic_window_cut_between_characters(tmp_path):
    d = Daemon(tmp_path / "c")
    try:
        # Three-byte characters: a window of 100 bytes around a caret cuts inside one.
        line = "Func f;\nIn A;\nVar x;\nf[x] = A[x] + " + "€" * 60 + " zz " + "€" * 200 + \
            ";\nf.compile();\n"
        status, body = d.post("/v1/compile", {"source": line})
        assert status == 200, body
        assert body["ok"] is False and "non-ASCII" in body["rendered"]
        assert "\ufffd" not in body["rendered"]  # cut between characters, nothing replaced
    finally:
        d.stop()


def test_a_worker_tail_cut_inside_a_character_is_stored_and_read(tmp_path):
    shutil.copy(ROOT / "templates" / "geglu.dt", tmp_path / "geglu.dt")
    (tmp_path / "crash.py").write_text(
        "import os, sys\n\n\ndef geglu_tiny(A, B):\n"
        "    sys.stderr.write('\\u00e9' * 5000 + 'x')\n    sys.stderr.flush()\n"
        "    os._exit(3)\n")
    (tmp_path / "t.yaml").write_text(
        "kernel: geglu_tiny\nalgorithm: geglu.dt\ncompile: [geglu]\nschedule: |\n"
        "  geglu.block(x:1, y:{32, 64});\n  geglu.tensorize(x:0, y:0);\n"
        "test_shapes:\n  - {x: 4, y: 64}\nshapes:\n  - {x: 4, y: 64}\ndtype: float32\n"
        "baselines: [crash.py:geglu_tiny, reference]\n")
    db = tmp_path / "x.db"
    r = subprocess.run([str(DTX), "explore", tmp_path / "t.yaml", "--test-shapes", "--db", db,
                        "--strategy", "exhaustive", "--screen-warmup", "1", "--screen-rep", "2",
                        "--top", "1", "--rounds", "1", "--full-rep", "2", "--json"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    (summary,) = json.loads(r.stdout)
    r = subprocess.run([str(DTX), "results", str(summary["exploration"]), "--db", db, "--json"],
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    text = r.stdout.decode("utf-8")  # strict: valid UTF-8
    crashed = [b for b in json.loads(text)["baselines"] if b["name"] == "crash.py:geglu_tiny"]
    assert crashed and "éééé" in json.dumps(crashed, ensure_ascii=False), crashed
    d = Daemon(tmp_path / "data", "--db", db)
    try:
        status, listed = d.get("/v1/explorations")
        assert status == 200 and listed["explorations"], listed
        status, _ = d.get(f"/v1/explorations/{summary['exploration']}/schedules")
        assert status == 200
    finally:
        d.stop()
