// /compare/A/B: two schedules side by side: their statements, their times, and a diff of their
// generated modules.
import { h, fill, ms, ratio } from "../dom.js";
import { api } from "../api.js";
import { METRICS, timeOf } from "../measure.js";
import { diffLines, hunks } from "../diff.js";

export async function render(root, { a, b }) {
  document.title = `Compare ${a} and ${b} · dtx`;
  const [A, B] = await Promise.all([api.get(`/v1/schedules/${a}`), api.get(`/v1/schedules/${b}`)]);
  const stA = (A.canonical || "").split(";").filter(Boolean);
  const stB = (B.canonical || "").split(";").filter(Boolean);
  const setA = new Set(stA), setB = new Set(stB);
  const title = (s) => [h("a", { href: `/schedules/${s.id}` }, `schedule ${s.id}`),
    s.kernel ? h("span.muted", ` ${s.kernel} at ${s.shape}, rank ${s.rank || "–"}`) : null];
  const statements = (list, other, side) => h("ol.statements", list.map((st) =>
    h(`li${other.has(st) ? "" : ".changed." + side}`, h("code", st))));

  // Times of one protocol against each other: the full protocol's where both have one, else
  // screening's (which every searched schedule has); a side without that protocol says so.
  const both = (p) => A[p] && B[p];
  const protocol = both("full") ? "full" : both("screen") ? "screen" : null;
  const pname = (p) => (p === "full" ? "full protocol" : "screening");
  const times = [];
  for (const p of ["full", "screen"]) {
    for (const [key, label] of METRICS) {
      const ta = timeOf(A[p], key), tb = timeOf(B[p], key);
      if (!ta && !tb) continue;
      times.push(h("tr", { dataset: { protocol: p, metric: key } },
        h("th", { scope: "row" }, `${label}, ${pname(p)}`),
        h("td.num", ta ? ms(ta.median) : h("span.muted", `no ${pname(p)} time`)),
        h("td.num", tb ? ms(tb.median) : h("span.muted", `no ${pname(p)} time`)),
        h("td.num", ta && tb ? ratio(tb.median / ta.median) : "–")));
    }
  }
  const protocolNote = protocol === "full" ? null
    : protocol === "screen" && (A.full || B.full)
      ? h("p.muted", { id: "protocol-note" }, `Only schedule ${A.full ? a : b} has a full-protocol time: the two are compared by their screening times.`)
      : !protocol ? h("p.muted", { id: "protocol-note" }, "The two have no protocol in common: their times are not compared.") : null;

  let diffView;
  if (!A.module || !B.module) {
    diffView = h("p.muted", "A module is not stored.");
  } else if (A.code_hash === B.code_hash) {
    diffView = h("p.identical", "The two schedules generate the same code.");
  } else {
    try {
      const script = diffLines(A.module.split("\n"), B.module.split("\n"));
      const added = script.filter((e) => e.op === "+").length, removed = script.filter((e) => e.op === "-").length;
      diffView = h("div",
        h("p.muted.small-text", `${removed} line${removed === 1 ? "" : "s"} only in ${a}, ${added} only in ${b}`),
        h("div.diff", { role: "region", "aria-label": "diff of the generated modules", tabindex: "0" },
          h("table", h("tbody", hunks(script).map((e) => e.skipped
            ? h("tr.skip", h("td", { colspan: 4 }, `… ${e.skipped} unchanged line${e.skipped === 1 ? "" : "s"}`))
            : h(`tr.${e.op === "+" ? "add" : e.op === "-" ? "del" : "same"}`,
              h("td.ln", e.a ?? ""), h("td.ln", e.b ?? ""), h("td.op", e.op), h("td.text", e.text)))))));
    } catch (e) {
      diffView = h("p.error-box", e.message);
    }
  }

  fill(root,
    h("div.page-head", h("h1", `Schedules ${a} and ${b}`), h("a", { href: `/compare/${b}/${a}` }, "swap")),
    A.kernel !== B.kernel || A.shape !== B.shape
      ? h("p.warning-box", `These schedules are of different explorations (${A.kernel} at ${A.shape}, ${B.kernel} at ${B.shape}).`)
      : null,
    h("section", { "aria-label": "times" }, h("h2", "Times"),
      times.length
        ? h("div", protocolNote, h("table.data.times", h("thead", h("tr", h("th", ""), h("th", { scope: "col" }, `${a}`), h("th", { scope: "col" }, `${b}`), h("th", { scope: "col" }, `${b} ÷ ${a}`))), h("tbody", times)))
        : h("p.muted", "Neither is measured.")),
    h("section", { "aria-label": "statements" }, h("h2", "Statements"),
      h("div.two-columns",
        h("div.side-a", h("h3", title(A)), statements(stA, setB, "a")),
        h("div.side-b", h("h3", title(B)), statements(stB, setA, "b")))),
    h("section", { "aria-label": "generated code" }, h("h2", "Generated code"), diffView));
}
