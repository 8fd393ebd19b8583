"""DT symbols named like Python keywords, builtins, the modules the generated code imports, or
names derived from other symbols (`x_size` beside Var `x`) must be renamed in the module, so it
is valid Python and computes the same as its reference."""
import ast

import pytest
import torch

from conftest import check_module, compile_dt

CLASHING = """\
Func range, lambda;
In tl, torch;
SIn x_size;
Var x, y;

lambda[x, y] = tl[x, y] * x_size;
range[x, y] = lambda[x, y] + torch[x, y];

range.block(x:1);
range.compile();
"""


@pytest.fixture
def clashing_module(dtc_binary, tmp_path):
    source = tmp_path / "clashing.dt"
    source.write_text(CLASHING)
    return compile_dt(tmp_path, source)


def test_module_is_valid_python(clashing_module):
    tree = ast.parse(open(clashing_module.__file__).read())
    defined = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
    # The wrapper is renamed; `range` itself stays the builtin the kernels loop with.
    assert "range_" in defined and "range" not in defined


def test_renamed_module_matches_reference(clashing_module):
    assert clashing_module.COMPILED == ("range",)
    assert clashing_module.PYTHON_NAMES == {"range": "range_"}
    assert clashing_module.range is clashing_module.range_
    check_module(clashing_module, {"x": 3, "y": 5}, torch.float32)
