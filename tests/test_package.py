"""The dtx package (pyproject.toml, src/dtx): installed editable into .venv by deploy/setup.sh,
type-checked, and of one protocol version with the binaries and the worker."""
import os
import re
import subprocess
import sys

from conftest import ROOT

VENV_PYTHON = ROOT / ".venv" / "bin" / "python"


def test_venv_imports_the_package_from_the_source_tree():
    r = subprocess.run([VENV_PYTHON, "-c", "import dtx; print(dtx.__file__)"],
                       capture_output=True, text=True, cwd="/", timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(ROOT / "src" / "dtx" / "__init__.py")


def test_importing_dtx_imports_neither_torch_nor_triton():
    # The binaries ask the interpreter where dtx.worker is: that must stay quick.
    r = subprocess.run([VENV_PYTHON, "-c", "import sys, dtx; "
                        "print(sorted({'torch', 'triton'} & set(sys.modules)))"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stdout + r.stderr


def test_mypy_is_clean():
    r = subprocess.run([VENV_PYTHON, "-m", "mypy"], capture_output=True, text=True, cwd=ROOT,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Success" in r.stdout


def test_package_worker_and_binaries_speak_one_protocol():
    import dtx
    header = (ROOT / "explorer" / "include" / "dtx" / "Protocol.h").read_text()
    binaries = int(re.search(r"kProtocolVersion = (\d+);", header).group(1))
    worker = int(re.search(r"^PROTOCOL = (\d+)$", (ROOT / "src" / "dtx" / "worker.py").read_text(),
                           re.M).group(1))
    assert dtx.PROTOCOL_VERSION == worker == binaries


def test_worker_refuses_another_protocol():
    r = subprocess.run([sys.executable, ROOT / "src" / "dtx" / "worker.py", "--role", "compile",
                        "--protocol", "99"], capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL, env={**os.environ, "TRITON_INTERPRET": "1"})
    assert r.returncode == 2
    assert "the caller speaks protocol 99, this worker" in r.stderr
    assert "speaks 1" in r.stderr
