"""Schedule template files (templates/*.yaml): each file is well formed, its algorithm compiles
with its default schedule, and the generated kernel agrees with the hand-written PyTorch baseline
of templates/baselines.py at every `test_shapes` entry, under the Triton interpreter. So the
baselines are checked against the compiler and the compiler against the baselines.

Until the template expander exists, a few concrete schedules of each template's space (the
smallest and largest blocks, every optional statement present and absent) are checked the same
way: SPACE_SAMPLES lists them."""
import importlib.util
import pathlib
import re
import sys

import pytest
import torch

from conftest import ROOT, _scale, compile_dt, compiled_funcs, run_dtc, tolerance

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0")

TEMPLATES = ROOT / "templates"
FILES = sorted(TEMPLATES.glob("*.yaml"))
FIELDS = {"kernel", "algorithm", "source", "compile", "schedule", "shapes", "test_shapes", "dtype",
          "baselines"}
REQUIRED = {"kernel", "schedule", "shapes", "test_shapes", "dtype", "baselines"}
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def _scalar(text):
    text = text.strip()
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def _flow(text):
    """`[a, b]` or `{x: 1, y: 2}`, without nesting."""
    text = text.strip()
    items = [item for item in (part.strip() for part in text[1:-1].split(",")) if item]
    if text.startswith("["):
        return [_scalar(item) for item in items]
    return {key.strip(): _scalar(value) for key, _, value in (i.partition(":") for i in items)}


def _value(text):
    text = text.split(" #")[0].strip()
    return _flow(text) if text[:1] in "[{" else _scalar(text)


def parse_template(text):
    """The template files' YAML: top-level keys with a scalar, a flow list or map, a `|` block,
    or a block list of flow maps. PyYAML reads the same files when it is installed (the test
    below compares the two); the project's environment does not need it."""
    data, lines, i = {}, text.splitlines(), 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        assert not line[0].isspace(), f"unexpected indentation: {line!r}"
        key, _, rest = line.partition(":")
        rest = rest.split(" #")[0].strip() if not rest.strip().startswith("|") else rest.strip()
        if rest.startswith("|"):
            block = []
            while i < len(lines) and (not lines[i].strip() or lines[i][0].isspace()):
                block.append(lines[i])
                i += 1
            while block and not block[-1].strip():
                block.pop()
            indent = min(len(b) - len(b.lstrip()) for b in block if b.strip())
            data[key] = "\n".join(b[indent:] for b in block) + "\n"
        elif rest:
            data[key] = _value(rest)
        else:
            items = []
            while i < len(lines) and lines[i].lstrip().startswith("- "):
                items.append(_value(lines[i].lstrip()[2:]))
                i += 1
            data[key] = items
    return data


def load_template(path):
    return parse_template(path.read_text())


def load_baselines(file="baselines.py", name="template_baselines"):
    spec = importlib.util.spec_from_file_location(name, TEMPLATES / file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


BASELINES = load_baselines()
# Liger-Kernel's ops (the `liger` baseline): imports without liger_kernel, which the tests do not
# need; its functions are checked to exist here, and run only where liger_kernel is installed.
LIGER_BASELINES = load_baselines("liger_baselines.py", "template_liger_baselines")
# Helion's kernels (the `helion` baseline): the same, without helion.
HELION_BASELINES = load_baselines("helion_baselines.py", "template_helion_baselines")

# Concrete schedules taken from each template's space (at one of its `shapes`): the extremes,
# every optional statement present, and the thesis' schedule where the default is another one.
SPACE_SAMPLES = {
    "geglu": [
        "geglu.block(x:1, y:128); geglu.tensorize(x:0, y:0); geglu.map(y, x); geglu.num_warps(1)",
        "geglu.block(x:4, y:4096); geglu.tensorize(x:0, y:512); geglu.map(x, y); geglu.num_warps(32)",
        "geglu.block(x:1, y:1024); geglu.tensorize(x:0, y:0); geglu.map(x, y); geglu.num_warps(8)",
        "geglu.block(x:2, y:256); geglu.tensorize(x:0, y:128); geglu.map(y, x); geglu.num_warps(2)",
    ],
    "dyt": [
        "dyt.block(x:1, y:128); dyt.tensorize(x:0, y:0); dyt.map(y, x); dyt.num_warps(1)",
        "dyt.block(x:4, y:4096); dyt.tensorize(x:0, y:512); dyt.map(x, y); dyt.num_warps(32)",
        "dyt.block(x:1, y:1024); dyt.tensorize(x:0, y:0); dyt.map(x, y); dyt.num_warps(8)",
    ],
    "swiglu": [
        "swiglu.block(x:1, y:128); swiglu.tensorize(x:0, y:0); swiglu.map(y, x); swiglu.num_warps(1)",
        "swiglu.block(x:4, y:4096); swiglu.tensorize(x:0, y:512); swiglu.map(x, y); swiglu.num_warps(32)",
        "swiglu.block(x:1, y:1024); swiglu.tensorize(x:0, y:0); swiglu.map(x, y); swiglu.num_warps(8)",
    ],
    "softmax": [
        "_softmax.block(x:1); _softmax.tensorize(x:0, y:64); _softmax.num_warps(1); "
        "_sum.block(x:1); _sum.tensorize(x:0, y:64); _sum.num_warps(1)",
        "_softmax.block(x:64); _softmax.tensorize(x:0, y:0); _sum.fuse_at(_softmax, x); "
        "_softmax.num_warps(32); _sum.block(x:64); _sum.tensorize(x:0, y:0); _sum.num_warps(32)",
        "_softmax.block(x:16); _softmax.tensorize(x:0, y:256); _softmax.num_warps(8); "
        "_sum.block(x:16); _sum.tensorize(x:0, y:256); _sum.num_warps(8)",
    ],
    "rmsnorm": [
        "rms_norm_out.block(x:1); rms_norm_out.tensorize(x:0, y:256, k:256); rms_norm_out.num_warps(1)",
        "rms_norm_out.block(x:16); rms_norm_out.tensorize(x:0, y:1024, k:1024); rms_norm_out.num_warps(32)",
        "rms_norm_out.block(x:8); rms_norm_out.tensorize(x:0, y:0, k:0); rms_norm_out.num_warps(16)",
        "rms_norm_out.block(x:2); rms_norm_out.tensorize(x:0, y:0, k:4096); rms_norm_out.num_warps(4)",
    ],
    "sum": [
        "sum_out.block(x:1); sum_out.tensorize(x:0, k:64); sum_out.num_warps(1)",
        "sum_out.block(x:4, k:65536); sum_out.tensorize(x:0, k:4096); sum_out.atomic(k); sum_out.num_warps(16)",
        "sum_out.block(x:64, k:1024); sum_out.tensorize(x:0, k:256); sum_out.num_warps(8)",
        "sum_out.block(x:1, k:1024); sum_out.tensorize(x:0, k:64); sum_out.atomic(k); sum_out.num_warps(1)",
    ],
    "matmul": [
        "matmul.block(m:16, n:64); matmul.tensorize(m:0, n:0, k:16); matmul.map(m, n); "
        "matmul.num_warps(2); matmul.num_stages(2)",
        "matmul.block(m:128, n:256); matmul.tensorize(m:0, n:0, k:32); matmul.map(m:mi/8, n, mi); "
        "matmul.num_warps(8); matmul.num_stages(3)",
        "matmul.block(m:256, n:128); matmul.tensorize(m:0, n:0, k:64); matmul.map(n:ni/8, m, ni); "
        "matmul.num_warps(8); matmul.num_stages(2)",
        "matmul.block(m:32, n:64); matmul.tensorize(m:0, n:0, k:32); matmul.map(n:ni/8, m, ni); "
        "matmul.persistent(interleaved); matmul.num_warps(4); matmul.num_stages(3)",
    ],
    "sigmoid_mm": [
        "sigmoid_mm.block(m:16, n:16); sigmoid_mm.tensorize(m:0, n:0, k:16); sigmoid_mm.map(m, n); "
        "mm.fuse_at(sigmoid_mm, n); sigmoid_mm.num_warps(2); sigmoid_mm.num_stages(2)",
        "sigmoid_mm.block(m:128, n:256); sigmoid_mm.tensorize(m:0, n:0, k:32); "
        "sigmoid_mm.map(m:mi/8, n, mi); mm.fuse_at(sigmoid_mm, n); sigmoid_mm.num_warps(8); "
        "sigmoid_mm.num_stages(4)",
        "sigmoid_mm.block(m:64, n:32); sigmoid_mm.tensorize(m:0, n:0, k:32); "
        "sigmoid_mm.map(n:ni/8, m, ni); mm.fuse_at(sigmoid_mm, n); sigmoid_mm.num_stages(5)",
    ],
    "gemm_gelu": [
        "out.block(m:32, n:64); out.tensorize(m:0, n:0, k:32); out.map(m, n); "
        "mm.fuse_at(out, n); out.num_warps(4); out.num_stages(2)",
        "out.block(m:128, n:256); out.tensorize(m:0, n:0, k:64); out.map(m:mi/8, n, mi); "
        "mm.fuse_at(out, n); out.num_warps(8); out.num_stages(4)",
        "out.block(m:64, n:32); out.tensorize(m:0, n:0, k:32); out.map(n:ni/8, m, ni); "
        "mm.fuse_at(out, n); out.num_stages(5)",
        "out.block(m:128, n:256); out.tensorize(m:0, n:0, k:64); out.map(m:mi/8, n, mi); "
        "mm.fuse_at(out, n); out.tma(A, B); out.persistent(interleaved); "
        "out.warp_specialize(k, m:16); out.num_warps(8); out.num_stages(3)",
    ],
    "gemm_epilogue": [
        "out.block(m:64, n:128); out.tensorize(m:0, n:0, k:32); out.map(m, n); "
        "mm.fuse_at(out, n); out.num_warps(4); out.num_stages(2)",
        "out.block(m:128, n:256); out.tensorize(m:0, n:0, k:64); out.map(m:mi/8, n, mi); "
        "mm.fuse_at(out, n); out.persistent(interleaved); out.num_warps(8); out.num_stages(4)",
        "out.block(m:64, n:128); out.tensorize(m:0, n:0, k:32); out.map(n:ni/8, m, ni); "
        "mm.fuse_at(out, n); out.persistent(interleaved); out.num_stages(5)",
        "out.block(m:128, n:256); out.tensorize(m:0, n:0, k:64); out.map(m:mi/8, n, mi); "
        "mm.fuse_at(out, n); out.tma(A, W); out.persistent(interleaved); "
        "out.warp_specialize(k, m:16); out.num_warps(8); out.num_stages(3)",
    ],
    "2mm": [
        "_2mm.block(m:16); _2mm.tensorize(m:0, n:32, k:16, l:16); mm.fuse_at(_2mm, m); "
        "_2mm.num_warps(2); _2mm.num_stages(1)",
        "_2mm.block(m:128, n:512); _2mm.tensorize(m:0, n:128, k:64, l:0); mm.fuse_at(_2mm, m); "
        "_2mm.num_warps(8); _2mm.num_stages(4)",
        "_2mm.block(m:64, n:64); _2mm.tensorize(m:0, n:64, k:32, l:32); mm.fuse_at(_2mm, m); "
        "_2mm.num_stages(2)",
    ],
    "attention": [
        "attention.block(m:16); attention.tensorize(m:0, n:32, k:16, l:16); mm.fuse_at(e, l); "
        "sm.fuse_at(attention, m); e.fuse_at(attention, m); e.block(m:16); "
        "e.tensorize(m:0, l:0, k:16); dvsr.block(m:16); dvsr.tensorize(m:0, l:0); "
        "attention.num_warps(2); attention.num_stages(1)",
        "attention.block(m:64, n:256); attention.tensorize(m:0, n:256, k:64, l:64); "
        "mm.fuse_at(e, l); dvsr.fuse_at(sm, m); sm.fuse_at(attention, m); "
        "e.fuse_at(attention, m); e.block(m:64); e.tensorize(m:0, l:0, k:64); dvsr.block(m:64); "
        "dvsr.tensorize(m:0, l:0); attention.num_warps(8); attention.num_stages(8)",
        "attention.block(m:32, n:64); attention.tensorize(m:0, n:64, k:32, l:0); "
        "mm.fuse_at(e, l); sm.fuse_at(attention, m); e.fuse_at(attention, m); e.block(m:32); "
        "e.tensorize(m:0, l:0, k:32); dvsr.block(m:32); dvsr.tensorize(m:0, l:0); "
        "attention.num_warps(4); attention.num_stages(2)",
    ],
    "layernorm": [
        "layernorm.block(x:1); layernorm.tensorize(x:0, y:1024, k:1024); "
        "mean.fuse_at(layernorm, x); rstd.fuse_at(layernorm, x); layernorm.num_warps(1)",
        "layernorm.block(x:16); layernorm.tensorize(x:0, y:0, k:0); mean.fuse_at(layernorm, x); "
        "rstd.fuse_at(layernorm, x); layernorm.num_warps(32)",
        "layernorm.block(x:4); layernorm.tensorize(x:0, y:0, k:4096); mean.fuse_at(layernorm, x); "
        "rstd.fuse_at(layernorm, x); layernorm.num_warps(8)",
    ],
    "groupnorm": [
        "groupnorm.block(b:1, g:1); groupnorm.tensorize(b:0, g:0, c:0, s:0); groupnorm.map(b, g); "
        "mean.fuse_at(groupnorm, g); rstd.fuse_at(groupnorm, g); groupnorm.num_warps(1)",
        "groupnorm.block(b:1, g:8); groupnorm.tensorize(b:0, g:0, c:0, s:256); "
        "mean.fuse_at(groupnorm, g); rstd.fuse_at(groupnorm, g); groupnorm.num_warps(32)",
        "groupnorm.block(b:1, g:2); groupnorm.tensorize(b:0, g:0, c:0, s:0); "
        "mean.fuse_at(groupnorm, g); rstd.fuse_at(groupnorm, g); groupnorm.num_warps(8)",
    ],
    "rope": [
        "q_out.block(b:1, s:1, h:4); q_out.tensorize(b:0, s:0, h:0, d:0); k_out.store_in(q_out); "
        "q_out.num_warps(1)",
        "q_out.block(b:1, s:4, h:32); q_out.tensorize(b:0, s:0, h:0, d:0); k_out.store_in(q_out); "
        "q_out.num_warps(16)",
        "q_out.block(b:1, s:2, h:8); q_out.tensorize(b:0, s:0, h:0, d:0); k_out.store_in(q_out)",
    ],
    "relu_squared": [
        "relu_squared.block(x:1, y:128); relu_squared.tensorize(x:0, y:0); "
        "relu_squared.map(y, x); relu_squared.num_warps(1)",
        "relu_squared.block(x:4, y:4096); relu_squared.tensorize(x:0, y:512); "
        "relu_squared.map(x, y); relu_squared.num_warps(32)",
        "relu_squared.block(x:1, y:1024); relu_squared.tensorize(x:0, y:0); "
        "relu_squared.map(x, y); relu_squared.num_warps(8)",
    ],
    "kl_div": [
        "kl_div.block(x:1); kl_div.tensorize(x:0, y:0); kl_div.num_warps(32)",
        "kl_div.block(x:4); kl_div.tensorize(x:0, y:4096); kl_div.num_warps(16)",
        "kl_div.block(x:2); kl_div.tensorize(x:0, y:1024); kl_div.num_warps(1)",
    ],
    "jsd": [
        "jsd.block(x:1); jsd.tensorize(x:0, y:0); jsd.num_warps(32)",
        "jsd.block(x:4); jsd.tensorize(x:0, y:4096); jsd.num_warps(16)",
        "jsd.block(x:2); jsd.tensorize(x:0, y:1024); jsd.num_warps(1)",
    ],
    "tvd": [
        "tvd.block(x:1); tvd.tensorize(x:0, y:0); tvd.num_warps(32)",
        "tvd.block(x:4); tvd.tensorize(x:0, y:4096); tvd.num_warps(16)",
        "tvd.block(x:2); tvd.tensorize(x:0, y:1024); tvd.num_warps(1)",
    ],
    "cross_entropy": [
        "cross_entropy.block(x:1); cross_entropy.tensorize(x:0, y:0); "
        "m.fuse_at(cross_entropy, x); lse.fuse_at(cross_entropy, x); cross_entropy.num_warps(32)",
        "cross_entropy.block(x:4); cross_entropy.tensorize(x:0, y:4096); "
        "m.fuse_at(cross_entropy, x); lse.fuse_at(cross_entropy, x); cross_entropy.num_warps(16)",
        "cross_entropy.block(x:2); cross_entropy.tensorize(x:0, y:1024); "
        "m.fuse_at(cross_entropy, x); lse.fuse_at(cross_entropy, x); cross_entropy.num_warps(1)",
    ],
    "cross_entropy_grad": [
        "cross_entropy_grad.block(x:1); cross_entropy_grad.tensorize(x:0, y:0); "
        "m.fuse_at(cross_entropy_grad, x); lse.fuse_at(cross_entropy_grad, x); "
        "loss.store_in(cross_entropy_grad); cross_entropy_grad.num_warps(32)",
        "cross_entropy_grad.block(x:2); cross_entropy_grad.tensorize(x:0, y:1024); "
        "m.fuse_at(cross_entropy_grad, x); lse.fuse_at(cross_entropy_grad, x); "
        "loss.store_in(cross_entropy_grad); cross_entropy_grad.num_warps(1)",
    ],
    "add_rmsnorm": [
        "add_rmsnorm.block(x:1); add_rmsnorm.tensorize(x:0, y:0, k:0); s.fuse_at(add_rmsnorm, x); "
        "s.store_in(add_rmsnorm); add_rmsnorm.num_warps(8)",
        "add_rmsnorm.block(x:4); add_rmsnorm.tensorize(x:0, y:1024, k:0); "
        "s.fuse_at(add_rmsnorm, x); s.store_in(add_rmsnorm); add_rmsnorm.num_warps(2)",
        "add_rmsnorm.block(x:2); add_rmsnorm.tensorize(x:0, y:2048, k:1024); "
        "s.fuse_at(add_rmsnorm, x); s.store_in(add_rmsnorm); add_rmsnorm.num_warps(1)",
    ],
    # Every schedule of these two spaces is checked at the test shapes by test_flash_attention.py.
    "flash_attention": [],
    "flash_attention_causal": [],
    "embedding": [
        "embedding.block(t:1, d:256); embedding.tensorize(t:0, d:0); embedding.map(t, d); "
        "embedding.num_warps(1)",
        "embedding.block(t:4, d:4096); embedding.tensorize(t:0, d:0); embedding.num_warps(16)",
        "embedding.block(t:16, d:1024); embedding.tensorize(t:0, d:0); embedding.map(t, d); "
        "embedding.num_warps(4)",
    ],
}


def _ids(paths):
    return [p.stem for p in paths]


def test_every_kernel_has_a_template():
    assert {p.stem for p in FILES} == {"geglu", "dyt", "swiglu", "softmax", "rmsnorm", "sum",
                                       "matmul", "sigmoid_mm", "gemm_gelu", "2mm", "attention",
                                       "layernorm", "groupnorm", "rope", "relu_squared", "kl_div",
                                       "jsd", "tvd", "cross_entropy", "embedding", "add_rmsnorm",
                                       "cross_entropy_grad", "flash_attention",
                                       "flash_attention_causal", "gemm_epilogue"}
    assert set(SPACE_SAMPLES) == {p.stem for p in FILES}


@pytest.mark.parametrize("path", FILES, ids=_ids(FILES))
def test_template_fields(path):
    t = load_template(path)
    assert set(t) <= FIELDS, f"unknown fields {set(t) - FIELDS}"
    assert REQUIRED <= set(t), f"missing fields {REQUIRED - set(t)}"
    assert t["kernel"] == path.stem
    assert (TEMPLATES / t["algorithm"]).is_file()
    assert t["dtype"] in DTYPES
    assert isinstance(t["compile"], list) and t["compile"]
    assert isinstance(t["schedule"], str) and t["schedule"].strip()
    for shapes in (t["shapes"], t["test_shapes"]):
        assert shapes and all(isinstance(s, dict) and s for s in shapes)
        assert all(isinstance(v, int) and v > 0 for s in shapes for v in s.values())
    for entry in t["baselines"]:
        if entry in ("torch", "torch.compile"):
            assert callable(getattr(BASELINES, t["kernel"], None)), \
                f"templates/baselines.py has no function {t['kernel']!r}"
        elif entry in ("liger", "helion"):
            module = LIGER_BASELINES if entry == "liger" else HELION_BASELINES
            assert callable(getattr(module, t["kernel"], None)), \
                f"templates/{entry}_baselines.py has no function {t['kernel']!r}"
        elif entry != "reference":
            file, _, rest = entry.partition(".py:")
            assert rest and (TEMPLATES / (file + ".py")).is_file(), entry


@pytest.mark.parametrize("path", FILES, ids=_ids(FILES))
def test_parser_agrees_with_pyyaml(path):
    yaml = pytest.importorskip("yaml")
    assert parse_template(path.read_text()) == yaml.safe_load(path.read_text())


def _check(module, template, sizes):
    """The module's first compiled Func against the hand-written baseline at `sizes` (each of
    its results, for a kernel that stores several)."""
    dtype = DTYPES[template["dtype"]]
    fn, _, make_inputs, keywords = compiled_funcs(module)[module.COMPILED[0]]
    args = make_inputs(sizes, dtype=dtype, seed=1)
    kwargs = {keywords[k]: v for k, v in sizes.items() if k in keywords}
    got = fn(*args, **kwargs)
    want = getattr(BASELINES, template["kernel"])(*args)
    gots, wants = (got, want) if isinstance(want, tuple) else ((got,), (want,))
    assert isinstance(gots, tuple) and len(gots) == len(wants)
    for g, w in zip(gots, wants):
        assert g.dtype == w.dtype == dtype
        assert g.shape == w.shape
        rtol, atol = tolerance(dtype)
        torch.testing.assert_close(g, w, rtol=rtol, atol=atol * _scale(w))


def _compile(tmp_path, template, schedule=None):
    module = compile_dt(tmp_path, TEMPLATES / template["algorithm"], schedule=schedule)
    assert list(module.COMPILED) == template["compile"]
    return module


@pytest.mark.parametrize("path", FILES, ids=_ids(FILES))
def test_default_schedule_matches_baseline(path, tmp_path, dtc_binary):
    template = load_template(path)
    module = _compile(tmp_path, template)
    for sizes in template["test_shapes"]:
        _check(module, template, sizes)


SAMPLES = [(name, i, s) for name, schedules in SPACE_SAMPLES.items()
           for i, s in enumerate(schedules)]


@pytest.mark.parametrize("name,index,schedule", SAMPLES, ids=[f"{n}-{i}" for n, i, _ in SAMPLES])
def test_schedules_of_the_space_match_baseline(name, index, schedule, tmp_path, dtc_binary):
    template = load_template(TEMPLATES / f"{name}.yaml")
    canonical = run_dtc(TEMPLATES / template["algorithm"], "--schedule", schedule, "--canonical")
    assert canonical.returncode == 0, canonical.stderr
    module = _compile(tmp_path, template, schedule)
    for sizes in template["test_shapes"]:
        _check(module, template, sizes)
