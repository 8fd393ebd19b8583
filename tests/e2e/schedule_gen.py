"""Random legal-looking schedules for the reduction and fusion conformance programs.

Each algorithm lists its Funcs (dimensions, reduction labels) and the fusions worth trying; the
generator draws blocks, tensor sizes, maps, fusions, split or atomic reductions and launch
parameters. dtc is the judge of legality: schedules it rejects are skipped and counted, so the
generator may be generous."""
import random

# name -> Funcs: {func: (dims, rvars)}, the compiled Func, candidate fusions (f, g, label)
ALGORITHMS = {
    "l3_03_softmax": {
        "funcs": {"exp_A": (["x", "y"], []), "sum_exp_A": (["x"], ["y"]),
                  "softmax_out": (["x", "y"], [])},
        "fusions": [("exp_A", "sum_exp_A", "x"), ("exp_A", "softmax_out", "x"),
                    ("exp_A", "softmax_out", "y"), ("sum_exp_A", "softmax_out", "x")],
    },
    "l4_02_softmax": {
        "funcs": {"_sum": (["x"], ["y"]), "_softmax": (["x", "y"], [])},
        "fusions": [("_sum", "_softmax", "x")],
    },
    "l3_04_rms_norm": {"funcs": {"rms_norm_out": (["x", "y"], ["k"])}, "fusions": []},
    "l3_17_sum": {"funcs": {"sum_out": (["x"], ["k"])}, "fusions": []},
    "l4_03_2mm": {
        "funcs": {"mm": (["m", "l"], ["k"]), "_2mm": (["m", "n"], ["l"])},
        "fusions": [("mm", "_2mm", "m")],
        "dot": True,
    },
    "l4_04_attention": {
        "funcs": {"mm": (["m", "l"], ["k"]), "e": (["m", "l"], []), "dvsr": (["m"], ["l"]),
                  "sm": (["m", "l"], []), "attention": (["m", "n"], ["l"])},
        "fusions": [("mm", "e", "l"), ("mm", "e", "m"), ("e", "dvsr", "m"), ("e", "sm", "m"),
                    ("e", "attention", "m"), ("dvsr", "sm", "m"), ("sm", "attention", "m")],
        "dot": True,
    },
}

BLOCKS = [1, 2, 3, 4, 5, 8, 16]
TENSORS = [1, 2, 4, 8, 16]


def random_schedule(name, rng):
    algo = ALGORITHMS[name]
    dot = algo.get("dot", False)
    statements = []
    fused_labels = {}
    for f, g, label in algo["fusions"]:
        if rng.random() < 0.5 and f not in fused_labels:
            statements.append(f"{f}.fuse_at({g}, {label})")
            fused_labels[f] = g
    for func, (dims, rvars) in algo["funcs"].items():
        blocks, tensors = {}, {}
        for d in dims:
            if rng.random() < 0.5:
                blocks[d] = rng.choice([16, 32] if dot else BLOCKS)
        for d in dims + rvars:
            r = rng.random()
            if dot:
                tensors[d] = 0 if r < 0.5 else rng.choice([16, 32])
            elif r < 0.35:
                tensors[d] = 0
            elif r < 0.7:
                size = rng.choice(TENSORS)
                if d in blocks:
                    size = min(size, 1 << (blocks[d].bit_length() - 1))
                tensors[d] = size
        # A reduction that is the whole definition may be split over program instances.
        if rvars and rng.random() < 0.25 and func not in fused_labels:
            k = rvars[0]
            blocks[k] = rng.choice([16, 32] if dot else [4, 8, 16])
            if tensors.get(k, 1) not in (0, 1) and tensors[k] > blocks[k]:
                tensors[k] = 0
            if rng.random() < 0.5:
                statements.append(f"{func}.atomic({k})")
        if blocks:
            statements.append(f"{func}.block(" + ", ".join(f"{d}:{s}" for d, s in blocks.items()) + ")")
            mapped = list(blocks)
            rng.shuffle(mapped)
            if len(mapped) > 1 or rng.random() < 0.3:
                statements.append(f"{func}.map(" + ", ".join(mapped) + ")")
        if tensors:
            statements.append(f"{func}.tensorize(" + ", ".join(f"{d}:{s}" for d, s in tensors.items()) + ")")
        if rng.random() < 0.3:
            statements.append(f"{func}.num_warps({rng.choice([1, 2, 4, 8])})")
        if rng.random() < 0.3:
            statements.append(f"{func}.num_stages({rng.choice([1, 2, 3, 4])})")
    rng.shuffle(statements)
    return "; ".join(statements)


def random_sizes(name, rng, dot=False):
    labels = set()
    for dims, rvars in ALGORITHMS[name]["funcs"].values():
        labels.update(dims + rvars)
    sizes = {l: rng.randint(1, 40 if ALGORITHMS[name].get("dot") else 20) for l in labels}
    if name == "l3_04_rms_norm":
        sizes["k"] = sizes["y"]  # both label the same input dimension
    return sizes
