// /explorations: every exploration, newest first, filtered by kernel and state; refreshed
// while any of them runs.
import { h, fill, ms, ratio, age, badge, progressBar, errorBox, keepFocus } from "../dom.js";
import { api } from "../api.js";

const STATES = ["queued", "running", "done", "failed", "cancelled"];
const PAGE = 50;

/// [done, total] for an exploration's progress bar.
/// [done, total] of the current phase (baselines, search, full protocol); total 0: not known.
export function progressOf(x) {
  if (x.state === "done") return [1, 1];
  const p = x.progress;
  if (p && p.phase_total > 0) return [p.phase_done, p.phase_total];
  if (p) return [p.done, p.budget || Math.max(p.done, x.space_size - p.rejected - p.duplicates, 0)];
  return [x.measured, x.candidates || 0];
}

export function progressCell(x) {
  const [done, total] = progressOf(x);
  const active = x.state === "running" || x.state === "queued";
  return h("div.state-cell", badge(x.state),
    active ? progressBar(done, total, `exploration ${x.id} progress`) : null,
    active && x.progress ? h("span.muted.small-text", `${x.progress.phase === "full" ? "full protocol" : x.progress.phase} ${done}/${total || "?"}`) : null);
}

export async function render(root, _params, query, { navigate, isCurrent }) {
  document.title = "Explorations · dtx";
  const kernel = query.get("kernel") || "";
  const state = query.get("state") || "";
  const offset = Math.max(0, Number(query.get("offset")) || 0);

  const kernelInput = h("input", { id: "filter-kernel", type: "search", value: kernel, placeholder: "any kernel", list: "kernel-names" });
  const stateSelect = h("select", { id: "filter-state" },
    h("option", { value: "" }, "any state"),
    STATES.map((s) => h("option", { value: s, selected: s === state }, s)));
  const apply = () => {
    const q = new URLSearchParams();
    if (kernelInput.value.trim()) q.set("kernel", kernelInput.value.trim());
    if (stateSelect.value) q.set("state", stateSelect.value);
    navigate(`/explorations${q.toString() ? "?" + q : ""}`, { replace: true });
  };
  const filters = h("form.filters", { role: "search", onsubmit: (e) => { e.preventDefault(); apply(); } },
    h("label", { for: "filter-kernel" }, "Kernel"), kernelInput, h("datalist", { id: "kernel-names" }),
    h("label", { for: "filter-state" }, "State"), stateSelect,
    h("button", { type: "submit" }, "Filter"),
    kernel || state ? h("a", { href: "/explorations" }, "Clear") : null);
  stateSelect.addEventListener("change", apply);

  const body = h("div");
  fill(root,
    h("div.page-head", h("h1", "Explorations"), h("a.button", { href: "/new" }, "New exploration")),
    filters, body);

  let timer = null;
  const load = async () => {
    const q = new URLSearchParams({ limit: PAGE, offset });
    if (kernel) q.set("kernel_contains", kernel); // a part of the name finds it
    if (state) q.set("state", state);
    let list;
    try {
      list = (await api.get(`/v1/explorations?${q}`)).explorations;
    } catch (e) {
      if (!isCurrent()) return;
      fill(body, errorBox(e, "The explorations could not be listed"));
      timer = setTimeout(load, 5000); // the server may be restarting: keep trying
      return;
    }
    if (!isCurrent()) return;
    const names = [...new Set(list.map((x) => x.kernel))].sort();
    fill(root.querySelector("#kernel-names"), names.map((n) => h("option", { value: n })));
    if (!list.length) {
      fill(body, h("p.empty", kernel || state ? "No exploration matches these filters. " : "No explorations yet. ",
        h("a", { href: "/new" }, "Start one"), "."));
      return;
    }
    keepFocus(body, () => fill(body, h("div.list-scroll", { tabindex: "0", role: "region", "aria-label": "explorations" }, table(list)), pager(list.length)));
    if (list.some((x) => x.state === "queued" || x.state === "running")) timer = setTimeout(load, 2000);
  };

  const pager = (n) => {
    const link = (o, text) => {
      const q = new URLSearchParams(query);
      q.set("offset", o);
      return h("a", { href: `/explorations?${q}` }, text);
    };
    return h("nav.pager", { "aria-label": "pages" },
      offset > 0 ? link(Math.max(0, offset - PAGE), "← Newer") : null,
      n === PAGE ? link(offset + PAGE, "Older →") : null);
  };

  await load();
  return () => clearTimeout(timer);
}

function table(list) {
  return h("table.data.explorations",
    h("caption.visually-hidden", "Explorations, newest first"),
    h("thead", h("tr",
      ["#", "Kernel", "Shape", "dtype", "Strategy", "State", "Best", "vs best baseline", "Device", "Created"]
        .map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", list.map((x) => h("tr", { dataset: { id: x.id, state: x.state } },
      h("td.num", h("a", { href: `/explorations/${x.id}`, dataset: { focus: `id-${x.id}` } }, String(x.id))),
      h("td", h("a", { href: `/explorations/${x.id}`, dataset: { focus: `kernel-${x.id}` } }, x.kernel)),
      h("td", h("code", x.shape)),
      h("td", x.dtype),
      h("td", x.strategy),
      h("td", progressCell(x)),
      h("td.num", ms(x.best_ms), x.best_protocol ? h("div.muted.small-text", x.best_protocol === "full" ? "full protocol" : "screening") : null),
      h("td.num", x.speedup ? (x.speedup >= 1 ? h("span.faster", ratio(x.speedup)) : h("span.loss", { title: "slower than the best baseline" }, "▼ ", ratio(x.speedup)))
        : x.best_ms && x.best_baseline_ms ? h("span.muted.small-text", `not compared (${x.best_protocol} and ${x.best_baseline_protocol} times)`) : "–",
        x.progress && x.progress.best_baseline ? h("span.muted.small-text", ` vs ${x.progress.best_baseline}`) : null),
      h("td", x.device || "–"),
      h("td", { title: x.created_at }, age(x.created_at))))));
}
