// /new: a new exploration. The algorithm and the template are checked as they are typed
// (POST /v1/compile, POST /v1/expand): diagnostics at their line, the space's size and what
// was pruned; submitting queues one exploration per shape and opens them.
import { h, fill, count, spaceSize, errorBox, parseShape, shapeText } from "../dom.js";
import { api } from "../api.js";
import { Editor } from "../editor.js";

const STRATEGIES = [
  ["exhaustive", "exhaustive: every schedule of the space"],
  ["random", "random sampling"],
  ["evolution", "evolution (genetic algorithm)"],
  ["local", "local search (hill climbing)"],
  ["tpe", "TPE (a model of the fastest schedules so far)"],
];
const KNOWN_BASELINES = ["torch", "torch.compile", "reference"];
// Measurement settings: [field, label, hint]; empty means the server's default.
const ADVANCED = [
  ["top", "Re-measure the top", "schedules re-measured with the full protocol"],
  ["rounds", "Rounds", "full-protocol rounds"],
  ["screen_warmup_ms", "Screening warm-up (ms)", ""],
  ["screen_rep_ms", "Screening repetitions (ms)", ""],
  ["full_warmup_ms", "Full warm-up (ms)", ""],
  ["full_rep_ms", "Full repetitions (ms)", ""],
  ["timeout_s", "Timeout per kernel (s)", ""],
  ["seed", "Seed", "for the sampling strategies"],
];

const size = (shape) => Object.values(shape).reduce((a, b) => a * b, 1);

export async function render(root, _params, query, { navigate, isCurrent }) {
  document.title = "New exploration · dtx";
  let templates = [];
  let templatesError = null;
  let gpus = null;
  try {
    const [list, health] = await Promise.all([api.get("/v1/templates"), api.get("/healthz")]);
    templates = list.templates;
    gpus = health.gpus;
  } catch (e) {
    templatesError = e;
  }
  // Without a GPU the server times kernels in the Triton interpreter: a template's GPU shapes
  // would take hours there, so the form starts from its largest test shape and a small budget.
  const interpreter = gpus === 0;
  if (!isCurrent()) return;

  const from = h("select", { id: "from" }, h("option", { value: "" }, "(empty)"),
    templates.map((t) => h("option", { value: t.name }, `${t.name}: ${t.kernel}`)));
  const description = h("p.muted.small-text");
  // The server says what a kernel's name may be (the rules dtx follows too): its answers to the
  // expansion below and to the submit show here.
  const kernel = h("input", { id: "kernel", required: true, placeholder: "geglu" });
  const kernelError = h("div.field-error", { id: "kernel-error", role: "alert" });
  const algorithm = new Editor("Algorithm", "", { rows: 14 });
  const template = new Editor("Schedule template", "", { rows: 10 });
  const shapes = h("textarea", { id: "shapes", rows: 3, spellcheck: "false", placeholder: "x=4096,y=4096 (one shape per line)" });
  const shapesError = h("div.field-error", { id: "shapes-error", role: "alert" });
  const dtype = h("select", { id: "dtype" }, ["float32", "float16", "bfloat16"].map((d) => h("option", { value: d }, d)));
  const strategy = h("select", { id: "strategy" }, STRATEGIES.map(([v, t]) => h("option", { value: v }, t)));
  const budget = h("input", { id: "budget", type: "number", min: 0, placeholder: "whole space" });
  const timeLimit = h("input", { id: "time_limit_s", type: "number", min: 0, step: "any", placeholder: "none" });
  const baselineBoxes = KNOWN_BASELINES.map((b) => h("input", { type: "checkbox", id: `baseline-${b}`, value: b }));
  const otherBaselines = h("input", { id: "baselines-other", placeholder: "FILE.py:FUNCTION, … (files of the server's templates directory)" });
  const gpuTime = h("input", { type: "checkbox", id: "times-gpu" });
  const hostTime = h("input", { type: "checkbox", id: "times-host" });
  const advanced = ADVANCED.map(([f, label, hint]) => [f, label, hint, h("input", { id: f, type: "number", min: 0, step: "any", placeholder: "default" })]);
  const space = h("div.space-summary", { id: "space", "aria-live": "polite" });
  const submitError = h("div", { id: "submit-error" });
  const submit = h("button.primary", { type: "submit", id: "submit" }, "Start exploring");

  const load = (t) => {
    kernel.value = t ? t.kernel : "";
    algorithm.value = t ? t.algorithm : "";
    template.value = t ? t.schedule : "";
    const largestTest = t && t.test_shapes && t.test_shapes.length
      ? [t.test_shapes.reduce((a, b) => (size(b) > size(a) ? b : a))] : null;
    shapes.value = t ? ((interpreter && largestTest) || t.shapes || []).map(shapeText).join("\n") : "";
    dtype.value = t ? t.dtype : "float32";
    strategy.value = interpreter ? "random" : t && t.strategy ? t.strategy : "exhaustive";
    budget.value = interpreter ? 12 : t && t.budget ? t.budget : "";
    for (const box of baselineBoxes) box.checked = t ? t.baselines.includes(box.value) : box.value === "torch";
    otherBaselines.value = t ? t.baselines.filter((b) => !KNOWN_BASELINES.includes(b)).join(", ") : "";
    fill(description, t ? t.description : "",
      t && interpreter && t.shapes.length ? ` GPU shapes: ${t.shapes.map(shapeText).join("; ")}.` : "");
    validate();
  };
  from.addEventListener("change", () => {
    load(templates.find((t) => t.name === from.value));
    const q = new URLSearchParams(location.search);
    if (from.value) q.set("from", from.value); else q.delete("from");
    history.replaceState(null, "", `/new${q.toString() ? "?" + q : ""}`);
  });

  const field = (label, input, hint) => h("div.field", h("label", { for: input.id }, label), input, hint ? h("div.hint", hint) : null);
  const form = h("form.new-exploration", { novalidate: true },
    h("div.field", h("label", { for: "from" }, "Start from a template"), from, description),
    h("div.field", h("label", { for: "kernel" }, "Kernel"), kernel,
      h("div.hint", "the name results are stored and looked up under (dtx best KERNEL)"), kernelError),
    algorithm.el,
    template.el,
    space,
    h("div.row",
      h("div.field", h("label", { for: "shapes" }, "Shapes"), shapes, h("div.hint", "one exploration per shape; LABEL=SIZE by the algorithm's labels"), shapesError),
      h("div.column",
        field("dtype", dtype),
        field("Strategy", strategy),
        field("Budget (measurements)", budget, "empty: the whole space (exhaustive) or the server's default"),
        field("Time limit (s)", timeLimit))),
    h("fieldset",
      h("legend", "Baselines"),
      baselineBoxes.map((box) => h("label.check", box, " ", box.value)),
      h("div.hint", "torch and torch.compile: the function named like the kernel in the server's baselines.py; " +
        "reference: the PyTorch code generated from the algorithm"),
      h("div.field", h("label", { for: "baselines-other" }, "Other baselines"), otherBaselines)),
    h("details.advanced",
      h("summary", "Measurement"),
      h("fieldset", h("legend", "Also time"), h("label.check", gpuTime, " GPU only (CUDA graph)"), h("label.check", hostTime, " host cost per call")),
      h("div.grid", advanced.map(([, label, hint, input]) => field(label, input, hint)))),
    submitError,
    h("div.actions", submit));

  fill(root,
    h("div.page-head", h("h1", "New exploration")),
    interpreter ? h("p.warning-box", { id: "interpreter-note" },
      "This server has no GPU: kernels run in the Triton interpreter on the CPU, whose times say " +
      "nothing about a GPU. The form starts from the template's largest test shape and 12 random " +
      "schedules; the template's GPU shapes are listed in its description.") : null,
    templatesError ? errorBox(templatesError, "The server's templates could not be listed") : null,
    form);

  // Validation as you type: the newest edit wins, older answers are dropped.
  let timer = null;
  let controller = null;
  const readShapes = () => {
    const list = [];
    shapes.value.split("\n").forEach((line, i) => {
      if (!line.trim()) return;
      try {
        list.push(parseShape(line.trim()));
      } catch (e) {
        throw new Error(`line ${i + 1}: ${e.message}`);
      }
    });
    if (!list.length) throw new Error("give at least one shape, as x=1024,y=512");
    return list;
  };

  async function validate() {
    clearTimeout(timer);
    timer = setTimeout(run, 300);
  }
  async function run() {
    if (controller) controller.abort();
    controller = new AbortController();
    const signal = controller.signal;
    fill(shapesError);
    fill(kernelError);
    // The space is shown at the first shape that reads; the server checks every one of them
    // against the algorithm; an error in any line is shown too.
    const valid = [];
    for (const line of shapes.value.split("\n").map((l) => l.trim()).filter(Boolean)) {
      try {
        valid.push(parseShape(line));
      } catch { /* reported below */ }
    }
    const shape = valid[0] || null;
    try {
      readShapes();
    } catch (e) {
      fill(shapesError, e.message);
    }
    if (!algorithm.value.trim()) {
      algorithm.setDiagnostics([], "");
      template.setDiagnostics([], "");
      fill(space);
      return;
    }
    algorithm.setStatus(h("span.muted", "checking…"));
    try {
      const r = await api.post("/v1/compile", { source: algorithm.value, emit: "check", file_name: `${kernel.value || "kernel"}.dt` }, signal);
      const diags = r.diagnostics.map((d) => ({ ...d }));
      algorithm.setDiagnostics(diags, r.ok ? h("span.ok", "✓ compiles") : h("span.bad", `${diags.filter((d) => d.severity !== "warning").length} error(s)`));
      if (!r.ok) {
        template.setStatus("");
        fill(space, h("p.muted", "Fix the algorithm to see the space."));
        return;
      }
    } catch (e) {
      if (e.name === "AbortError") return;
      algorithm.setDiagnostics([], h("span.bad", e.message));
      return;
    }
    if (!template.value.trim()) {
      template.setDiagnostics([], h("span.muted", "empty: the algorithm's own schedule"));
      fill(space);
      return;
    }
    if (!shape) {
      template.setStatus(h("span.muted", "give a shape to see the space"));
      fill(space);
      return;
    }
    template.setStatus(h("span.muted", "expanding…"));
    try {
      const r = await api.post("/v1/expand", {
        algorithm: algorithm.value, schedule: template.value, shapes: valid, dtype: dtype.value,
        kernel: kernel.value || "kernel", limit: 5, max_points: 200000,
      }, signal);
      template.setDiagnostics([], h("span.ok", `✓ ${count(r.distinct)} schedule${r.distinct === 1 ? "" : "s"} at ${shapeText(shape)}`));
      const pruned = Object.entries(r.rejected || {});
      fill(space,
        h("p",
          h("strong", spaceSize(r.space_size, r.overflowed)), " points in the space", r.truncated ? " (expanded up to 200,000)" : "",
          " → ", h("strong", { id: "distinct" }, count(r.distinct)), " distinct schedules",
          r.duplicates ? `, ${count(r.duplicates)} duplicates` : "",
          r.unused_choices ? `, ${count(r.unused_choices)} with unused choices` : "",
          pruned.length ? [", pruned: ", pruned.map(([k, v]) => `${count(v)} by ${k}`).join(", ")] : ", none pruned"),
        r.schedules.length
          ? h("details", h("summary", `The first ${r.schedules.length}`),
            h("ol", r.schedules.map((s) => h("li", h("code", s.canonical || "(the algorithm's own schedule)")))))
          : null);
    } catch (e) {
      if (e.name === "AbortError") return;
      showError(e, { quiet: true });
    }
  }

  /// An API error shown where it belongs: in an editor at its lines, at a field, or above the
  /// submit button.
  function showError(e, { quiet = false } = {}) {
    const details = Array.isArray(e.details) ? e.details : [];
    if (e.field === "schedule" && details.length) {
      template.setDiagnostics(details, h("span.bad", e.message));
      fill(space);
    } else if (e.field === "algorithm" && details.length) {
      algorithm.setDiagnostics(details, h("span.bad", e.message));
    } else if (e.field === "kernel") {
      fill(kernelError, e.message);
      template.setStatus("");
      fill(space);
    } else if (e.field === "shapes" || e.field === "shape") {
      fill(shapesError, e.message);
      template.setStatus("");
      fill(space); // no space to show at a shape the server refuses
    } else if (quiet) {
      template.setDiagnostics([], h("span.bad", e.message));
    } else {
      fill(submitError, errorBox(e, "Not started"));
    }
    if (!quiet) fill(submitError, errorBox(e, "Not started"));
  }

  for (const el of [kernel, shapes, dtype]) el.addEventListener("input", validate);
  algorithm.onInput(validate);
  template.onInput(validate);

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    fill(submitError);
    let body;
    try {
      body = {
        kernel: kernel.value,
        algorithm: algorithm.value,
        schedule: template.value,
        shapes: readShapes(),
        dtype: dtype.value,
        strategy: strategy.value,
        baselines: [...baselineBoxes.filter((b) => b.checked).map((b) => b.value),
          ...otherBaselines.value.split(",").map((s) => s.trim()).filter(Boolean)],
      };
      if (budget.value !== "") body.budget = Number(budget.value);
      if (timeLimit.value !== "") body.time_limit_s = Number(timeLimit.value);
      const times = ["bench", ...(gpuTime.checked ? ["gpu"] : []), ...(hostTime.checked ? ["host"] : [])];
      if (times.length > 1) body.times = times;
      for (const [f, , , input] of advanced) if (input.value !== "") body[f] = Number(input.value);
    } catch (err) {
      fill(submitError, errorBox(err, "Not started"));
      return;
    }
    submit.disabled = true;
    submit.textContent = "Starting…";
    try {
      const created = await api.post("/v1/explorations", body);
      navigate(`/explorations/${created.explorations.map((x) => x.id).join(",")}`);
    } catch (err) {
      submit.disabled = false;
      submit.textContent = "Start exploring";
      showError(err);
      if (err.field === "kernel") kernel.focus();
    }
  });

  const start = templates.find((t) => t.name === (query.get("from") ?? "geglu"));
  if (start) from.value = start.name;
  load(start);
  return () => {
    clearTimeout(timer);
    if (controller) controller.abort();
  };
}
