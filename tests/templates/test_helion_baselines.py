"""The `helion` baseline (templates/helion_baselines.py, its kernels in helion_kernels.py) where
Helion is not installed, as in CI: the file imports, each function says that Helion is missing,
and the row reductions (RMSNorm, LayerNorm, softmax) name it. Where Helion is
installed these skip; its kernels are then timed on a GPU (`tests/gpu/helion_tune.py`)."""
import importlib.util

import pytest
import torch

from conftest import compile_dt, compiled_funcs
from test_template_baselines import HELION_BASELINES, TEMPLATES, load_template

NO_HELION = pytest.mark.skipif(importlib.util.find_spec("helion") is not None,
                               reason="helion is installed here")
ROW_REDUCTIONS = ["rmsnorm", "layernorm", "softmax"]


@pytest.mark.parametrize("name", ROW_REDUCTIONS)
def test_the_row_reductions_name_helion(name):
    template = load_template(TEMPLATES / f"{name}.yaml")
    assert "helion" in template["baselines"]
    assert callable(getattr(HELION_BASELINES, name, None))


@NO_HELION
@pytest.mark.parametrize("name", ROW_REDUCTIONS)
def test_a_helion_baseline_says_helion_is_not_installed(name, tmp_path, dtc_binary):
    template = load_template(TEMPLATES / f"{name}.yaml")
    module = compile_dt(tmp_path, TEMPLATES / template["algorithm"])
    make_inputs = compiled_funcs(module)[module.COMPILED[0]][2]
    args = make_inputs(template["test_shapes"][0], dtype=torch.float32)
    with pytest.raises(ModuleNotFoundError, match="helion is not installed"):
        getattr(HELION_BASELINES, name)(*args)
