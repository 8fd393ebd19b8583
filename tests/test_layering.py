"""The compiler's layers include only the layers below them (docs/architecture.md): the
schedule layer never sees the front end, the kernel IR knows no lowering or printing, and only
the printers know Triton's and PyTorch's spelling. A new include across the layers fails here
with the file and line."""
import pathlib
import re

from conftest import ROOT

SRC = ROOT / "compiler" / "src"
# Each layer and the layers it may include (besides itself).
ALLOWED = {
    "support": set(),
    "ir": {"support"},
    "kir": {"support"},
    "schedule": {"support", "ir"},
    "frontend": {"support", "ir", "schedule"},
    "lower": {"support", "ir", "kir", "schedule"},
    "codegen": {"support", "ir", "kir", "lower"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"(\w+)/')


def test_every_layer_includes_only_the_layers_below_it():
    crossings = []
    for layer, allowed in ALLOWED.items():
        for path in sorted((SRC / layer).rglob("*")):
            if path.suffix not in (".h", ".cpp"):
                continue
            for n, line in enumerate(path.read_text().splitlines(), 1):
                m = INCLUDE.match(line)
                if m and m.group(1) in ALLOWED and m.group(1) not in allowed | {layer}:
                    crossings.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not crossings, "includes across the layers:\n" + "\n".join(crossings)


def test_the_layers_are_the_directories():
    dirs = {p.name for p in SRC.iterdir() if p.is_dir()}
    assert dirs == set(ALLOWED), dirs


def test_no_triton_or_torch_spelling_below_the_printers():
    # Kernel code is typed IR until codegen/ prints it: no Triton call text in lowering or the
    # kernel IR, outside comments and messages about them.
    spelled = []
    for layer in ("ir", "kir", "lower", "schedule"):
        for path in sorted((SRC / layer).rglob("*.cpp")) + sorted((SRC / layer).rglob("*.h")):
            for n, line in enumerate(path.read_text().splitlines(), 1):
                code = line.split("//", 1)[0]
                if re.search(r'"(tl|torch|triton)\.\w+\(', code):
                    spelled.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not spelled, "\n".join(spelled)
