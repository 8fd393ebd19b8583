// /schedules/ID: the full DT program, the generated Triton module, every measurement of its
// code with device and versions, and the lines a CI job uses to fetch the best kernel.
import { h, fill, ms, age, copyButton, downloadButton, shellWord } from "../dom.js";
import { api, token } from "../api.js";
import { codeBlock } from "../highlight.js";
import { timeOf } from "../measure.js";

export async function render(root, { id }, _query, { navigate }) {
  const s = await api.get(`/v1/schedules/${id}`);
  const kernel = s.kernel || "kernel";
  document.title = `Schedule ${id} of ${kernel} · dtx`;
  const origin = location.origin;
  const auth = token() ? ` -H "Authorization: Bearer $DTX_TOKEN"` : "";
  const shapeArg = s.shape || "";
  const dtype = s.dtype || "float32";
  // Every word quoted for the shell it is pasted into (a name is data, not a command).
  const q = shellWord;
  const module = `python3 -c 'import json,sys; print(json.load(sys.stdin)["module"], end="")'`;
  const best = `${origin}/v1/best?kernel=${encodeURIComponent(kernel)}&shape=${encodeURIComponent(shapeArg)}&dtype=${encodeURIComponent(dtype)}`;
  const ci = [
    ["The best schedule known for this kernel and shape, as a module (the dtx CLI)",
     `dtx best ${q(kernel)} --shape ${q(shapeArg)} --dtype ${q(dtype)} --server ${q(origin)}${token() ? ' --token "$DTX_TOKEN"' : ""} -o ${q(`${kernel}.py`)}`],
    ["The same over HTTP",
     `curl -fsS${auth} ${q(best)} | ${module} > ${q(`${kernel}.py`)}`],
    ["This schedule exactly",
     `curl -fsS${auth} ${q(`${origin}/v1/schedules/${id}`)} | ${module} > ${q(`${kernel}_schedule_${id}.py`)}`],
  ];

  const compareInput = h("input", { id: "compare-with", type: "number", min: 1, placeholder: "schedule id", "aria-label": "compare with schedule" });
  const compareForm = h("form.inline", {
    onsubmit: (e) => {
      e.preventDefault();
      if (compareInput.value) navigate(`/compare/${id}/${Number(compareInput.value)}`);
    },
  }, h("label", { for: "compare-with" }, "Compare with"), compareInput, h("button", { type: "submit" }, "Compare"));

  let bestLink = null;
  if (s.exploration && s.rank !== 1) {
    try {
      const top = await api.get(`/v1/explorations/${s.exploration}/schedules?limit=1`);
      const first = top.schedules[0];
      if (first && first.rank === 1 && first.schedule_id !== id)
        bestLink = h("a", { href: `/compare/${first.schedule_id}/${id}` }, "compare with the fastest");
    } catch { /* no link */ }
  }

  const ranking = s.full || s.screen;
  const t = timeOf(ranking, "bench");
  fill(root,
    h("div.page-head",
      h("h1", `Schedule ${id}`, s.kernel ? [" of ", h("a.plain", { href: `/explorations/${s.exploration}` }, s.kernel), " at ", h("code", s.shape)] : null)),
    h("p.meta",
      s.rank ? `rank ${s.rank}` : "not ranked",
      s.exploration ? [" in ", h("a", { href: `/explorations/${s.exploration}` }, `exploration ${s.exploration}`)] : null,
      ` · ${dtype}`,
      t ? ` · ${ms(t.median)} (${ranking.protocol})` : ranking ? ` · ${ranking.status}` : "",
      ` · code ${s.code_hash.slice(0, 12)}`,
      bestLink ? [" · ", bestLink] : null),
    h("section", { "aria-label": "schedule" },
      h("h2", "Schedule"),
      h("ol.statements", (s.canonical || "").split(";").filter(Boolean).map((st) => h("li", h("code", st)))),
      compareForm),
    h("section.ci", { "aria-label": "for CI" },
      h("h2", "In CI"),
      ci.map(([what, line]) => h("div.ci-line", h("div.muted.small-text", what), h("div.command", h("code", line), copyButton(() => line))))),
    h("section", { "aria-label": "DT program" },
      h("div.section-head", h("h2", "DT program"),
        s.program ? [copyButton(() => s.program), downloadButton(() => s.program, `${kernel}.dt`)] : null),
      s.program ? codeBlock(s.program, "dt", "DT program") : h("p.muted", "The exploration of this schedule is not stored.")),
    h("section", { "aria-label": "generated code" },
      h("div.section-head", h("h2", "Generated Triton"),
        s.module ? [copyButton(() => s.module), downloadButton(() => s.module, `${kernel}.py`)] : null),
      s.module ? codeBlock(s.module, "python", "generated Triton module") : h("p.muted", "The module is not stored.")),
    h("section", { "aria-label": "measurements" },
      h("h2", "Measurements"),
      measurementsTable(s.measurements)));
}

export function measurementsTable(list) {
  if (!list.length) return h("p.muted", "Not measured yet.");
  const q = (m, key) => {
    const t = timeOf(m, key);
    if (!t) return "–";
    return t.lo !== null && t.lo !== undefined ? [ms(t.median), h("div.muted.small-text", `${ms(t.lo)} – ${ms(t.hi)}`)] : ms(t.median);
  };
  return h("div.table-scroll", h("table.data.measurements",
    h("thead", h("tr", ["Protocol", "Status", "do_bench", "GPU only", "host", "rel. L2 error", "Device", "Driver", "CUDA", "torch", "Triton", "Exploration", "When"]
      .map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", list.map((m) => h("tr", { dataset: { status: m.status } },
      h("td", m.protocol, m.rounds > 1 ? h("span.muted", ` ×${m.rounds}`) : null),
      h("td", h(`span.status-${m.status === "ok" ? "ok" : "failed"}`, m.status), m.message ? h("div.failure", m.message) : null),
      h("td.num", q(m, "bench")),
      h("td.num", q(m, "gpu")),
      h("td.num", q(m, "host")),
      h("td.num", m.rel_l2 !== undefined ? m.rel_l2.toExponential(2) : "–"),
      h("td", m.device, m.device_kind && m.device_kind !== m.device ? h("div.muted.small-text", m.device_kind) : null),
      h("td", m.driver || "–"),
      h("td", m.cuda || "–"),
      h("td", m.torch || "–"),
      h("td", m.triton || "–"),
      h("td", m.exploration ? h("a", { href: `/explorations/${m.exploration}` }, String(m.exploration)) : "–"),
      h("td", { title: m.created_at }, age(m.created_at)))))));
}

