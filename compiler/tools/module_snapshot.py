#!/usr/bin/env python3
"""The generated module of every conformance program, example and template, and of up to N
distinct schedules of each template's space, as a JSON map from case to module text hash, so
that a refactoring of the compiler can show it changed no generated code:

    compiler/tools/module_snapshot.py --out before.json      # on the old build
    compiler/tools/module_snapshot.py --compare before.json  # on the new: differences, exit 1

Cases whose compilation fails are recorded with their diagnostics' hash (they must fail alike).
"""
import argparse
import hashlib
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
DTC = ROOT / "build" / "compiler" / "dtc"
DTX = ROOT / "build" / "explorer" / "dtx"


def compile_case(path, schedule=None):
    cmd = [str(ARGS.dtc), str(path)] + (["--schedule", schedule] if schedule is not None else [])
    r = subprocess.run(cmd, capture_output=True, text=True)
    text = r.stdout if r.returncode == 0 else "FAILED\n" + r.stderr
    if ARGS.strip_from and ARGS.strip_from in text:
        text = text[:text.index(ARGS.strip_from)]
    return hashlib.sha256(text.encode()).hexdigest(), text


ARGS = None


def cases(per_template):
    for path in sorted((ROOT / "tests" / "conformance").glob("*.dt")):
        yield path.relative_to(ROOT).as_posix(), path, None
    for path in sorted((ROOT / "examples").glob("*.dt")) + sorted((ROOT / "templates").glob("*.dt")):
        yield path.relative_to(ROOT).as_posix(), path, None
    for yaml in sorted((ROOT / "templates").glob("*.yaml")):
        r = subprocess.run([str(DTX), "expand", str(yaml), "--list", "--limit", "5000"],
                           capture_output=True, text=True)
        dt = yaml.with_suffix(".dt")
        listed = list(dict.fromkeys(line for line in r.stdout.splitlines()
                                    if line and not line.startswith("#")))
        step = max(1, len(listed) // per_template)  # spread over the space, not its first corner
        for line in listed[::step][:per_template]:
            if dt.exists():
                yield f"{yaml.relative_to(ROOT).as_posix()}: {line}", dt, line


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-template", type=int, default=40)
    ap.add_argument("--out")
    ap.add_argument("--compare")
    ap.add_argument("--texts", help="a directory to write each differing module to")
    ap.add_argument("--dtc", default=DTC, help="the compiler to run (default: the build's)")
    ap.add_argument("--strip-from", help="hash each module only up to this text (a part a "
                                         "change added on purpose)")
    global ARGS
    args = ARGS = ap.parse_args()
    snapshot, texts = {}, {}
    for name, path, schedule in cases(args.per_template):
        snapshot[name], texts[name] = compile_case(path, schedule)
    print(f"{len(snapshot)} cases, {sum(1 for t in texts.values() if t.startswith('FAILED'))} failing")
    if args.out:
        pathlib.Path(args.out).write_text(json.dumps(snapshot, indent=1, sort_keys=True) + "\n")
    if args.compare:
        before = json.loads(pathlib.Path(args.compare).read_text())
        differ = sorted(k for k in before.keys() & snapshot.keys() if before[k] != snapshot[k])
        missing = sorted(before.keys() - snapshot.keys())
        for k in differ:
            print("differs:", k)
            if args.texts:
                out = pathlib.Path(args.texts)
                out.mkdir(parents=True, exist_ok=True)
                safe = hashlib.sha256(k.encode()).hexdigest()[:12]
                (out / f"{safe}.py").write_text(f"# {k}\n" + texts[k])
        for k in missing:
            print("missing:", k)
        print(f"{len(differ)} differ, {len(missing)} missing, "
              f"{len(before.keys() & snapshot.keys()) - len(differ)} identical")
        return 1 if differ or missing else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
