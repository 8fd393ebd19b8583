// /explorations/ID[,ID...]: one exploration per shape (tabs when several): its state and
// progress, the thesis' chart, the ranked table, how easy the space is; live while it runs.
import { h, fill, ms, ratio, count, spaceSize, age, duration, badge, progressBar, errorBox, keepFocus } from "../dom.js";
import { api, follow } from "../api.js";
import { drawChart, baselineColor } from "../chart.js";
import { METRICS, timeOf, rankingMeasurement, baselinesByName, metricsPresent } from "../measure.js";
import { codeBlock } from "../highlight.js";
import { progressOf } from "./explorations.js";

const WITHIN = 1.05; // the thesis' "competitive": within 5% of the best baseline
const ROWS = 200;    // table rows shown before "show more"

export async function render(root, { ids }, query, ctx) {
  if (!ids.length) throw new Error("no exploration id in the address");
  const panels = new Map();
  let cleanups = [];
  const tabs = ids.length > 1 ? h("div.tabs", { role: "tablist", "aria-label": "shapes" }) : null;
  const holder = h("div");
  fill(root, tabs, holder);

  let showing = 0;
  const show = async (id) => {
    const mine = ++showing;
    cleanups.forEach((c) => c());
    cleanups = [];
    if (tabs) {
      for (const b of tabs.children) {
        const on = Number(b.dataset.id) === id;
        b.setAttribute("aria-selected", on ? "true" : "false");
        b.tabIndex = on ? 0 : -1;
      }
      history.replaceState(null, "", `${location.pathname}${location.search}#${id}`);
    }
    const panel = h("section.panel", { role: tabs ? "tabpanel" : null, id: `panel-${id}` });
    fill(holder, panel);
    panels.set(id, panel);
    try {
      const done = await explorationPanel(panel, id, query, ctx);
      if (mine === showing) cleanups.push(done);
      else done(); // another tab was chosen meanwhile
    } catch (e) {
      // One exploration that cannot be shown (deleted, a mistyped id) leaves the others.
      if (mine === showing) fill(panel, errorBox(e, `Exploration ${id}`));
    }
  };

  if (tabs) {
    // Tab labels: each exploration's shape.
    const xs = await Promise.all(ids.map((id) => api.get(`/v1/explorations/${id}`).catch(() => null)));
    ids.forEach((id, i) => {
      const b = h("button.tab", { role: "tab", type: "button", dataset: { id }, "aria-controls": `panel-${id}` },
        xs[i] ? xs[i].shape : `#${id}`);
      b.addEventListener("click", () => show(id));
      b.addEventListener("keydown", (e) => {
        const k = ids.indexOf(id) + (e.key === "ArrowRight" ? 1 : e.key === "ArrowLeft" ? -1 : 0);
        if (k !== ids.indexOf(id) && k >= 0 && k < ids.length) {
          show(ids[k]).then(() => tabs.children[k].focus());
        }
      });
      tabs.append(b);
    });
  }
  const wanted = Number(location.hash.slice(1));
  await show(ids.includes(wanted) ? wanted : ids[0]);
  return () => cleanups.forEach((c) => c());
}

/// One exploration's panel; returns its cleanup.
async function explorationPanel(panel, id, query, { navigate, isCurrent }) {
  let x = await api.get(`/v1/explorations/${id}`);
  document.title = `${x.kernel} ${x.shape} · exploration ${id} · dtx`;
  const state = {
    metric: query.get("metric") || "bench",
    log: query.get("log") === "1",
    filter: query.get("q") || "",
    status: query.get("status") || "",
    sort: { key: "rank", dir: 1 },
    rows: ROWS,
    selected: new Set(),
    ranked: null,
    chart: null,
  };

  const head = h("div.exploration-head");
  const progress = h("div.progress-section", { "aria-live": "polite" });
  const summary = h("div.cards");
  const chartControls = h("div.chart-controls");
  const canvas = h("canvas", { id: `chart-${id}`, role: "img", "aria-label": "run time of every measured schedule, sorted, with the baselines as horizontal lines" });
  const chartBox = h("div.chart-box", canvas);
  const chartError = h("div");
  const legend = h("ul.legend", { "aria-label": "baselines" });
  const tableBox = h("div");
  const tableError = h("div");
  const details = h("details.source",
    h("summary", "Algorithm and schedule template"),
    h("div.two-columns",
      h("div", h("h3", "Algorithm"), codeBlock(x.algorithm || "", "dt", "algorithm")),
      h("div", h("h3", "Template"), codeBlock(x.template || "", "dt", "schedule template"))));
  fill(panel, head, progress, summary,
    h("section.chart-section", { "aria-label": "chart" }, h("h2", "Schedules by run time"), chartControls, chartError, chartBox, legend),
    h("section", { "aria-label": "ranked schedules" }, h("h2", "Ranked schedules"), tableError, tableBox),
    details);

  const metricSelect = h("select", { id: "metric" });
  let metricKeys = "";
  metricSelect.addEventListener("change", () => { state.metric = metricSelect.value; keepInUrl(); renderResults(); });
  const logBox = h("input", { type: "checkbox", id: "log-scale", checked: state.log });
  logBox.addEventListener("change", () => { state.log = logBox.checked; keepInUrl(); renderResults(); });
  const chartInfo = h("span.muted.small-text");
  fill(chartControls, h("label", { for: "metric" }, "Time"), metricSelect, h("label.check", logBox, " log scale"), chartInfo);

  const cancel = async (btn) => {
    btn.disabled = true;
    try {
      await api.post(`/v1/explorations/${id}/cancel`);
      btn.textContent = "Cancelling…";
    } catch (e) {
      btn.disabled = false;
      head.append(errorBox(e, "Cancel failed"));
    }
  };

  const renderHead = () => keepFocus(head, () => {
    const active = x.state === "queued" || x.state === "running";
    fill(head,
      h("div.page-head",
        h("h1", h("a.plain", { href: `/explorations?kernel=${encodeURIComponent(x.kernel)}` }, x.kernel), " at ", h("code", x.shape)),
        badge(x.state),
        active ? h("button.danger", { type: "button", id: "cancel", onclick: (e) => cancel(e.target) }, "Cancel") : null),
      h("p.meta",
        `exploration ${x.id} · ${x.dtype} · ${x.strategy}` + (x.budget ? ` (budget ${count(x.budget)})` : "") +
        ` · ${x.device || "device not known yet"} · created ${age(x.created_at)}`,
        x.progress ? ` · ${duration(x.progress.elapsed_s)}` : ""),
      x.message ? h(`p.${x.state === "failed" ? "error-box" : "muted"}`, x.message) : null);
  });

  const renderProgress = (p) => {
    const active = x.state === "queued" || x.state === "running";
    if (!active) return fill(progress);
    const [done, total] = progressOf({ ...x, progress: p || x.progress });
    const q = p || x.progress;
    fill(progress, progressBar(done, total, "measured"),
      h("p.small-text", q
        ? `${q.phase}: ${count(q.done)} of ${total ? count(total) : "?"} measured · ${count(q.rejected)} pruned · ${count(q.duplicates)} duplicates · ${count(q.reused)} reused · ${count(q.failed)} failed` +
          (q.eta_s ? ` · about ${duration(q.eta_s)} left` : "") +
          (q.best_ms ? ` · best so far ${ms(q.best_ms)}` : "")
        : "queued: waiting for a turn on the workers"));
  };

  // Everything that depends on the ranked schedules and the chosen metric.
  const renderResults = () => {
    const r = state.ranked;
    if (!r) return;
    const scheduleMs = r.schedules.map(rankingMeasurement).filter(Boolean);
    const bl = baselinesByName(r.baselines);
    const present = metricsPresent([...scheduleMs, ...bl.values()]);
    if (present.length && !present.some(([k]) => k === state.metric)) state.metric = present[0][0];
    const baselines = [...bl.entries()]
      .map(([name, m], i) => ({ name, t: timeOf(m, state.metric), color: baselineColor(i), m }));
    const bestBaseline = baselines.filter((b) => b.t).sort((a, b) => a.t.median - b.t.median)[0];
    const rows = r.schedules.map((s) => {
      const m = rankingMeasurement(s);
      const t = timeOf(m, state.metric);
      return { s, m, t, speedup: t && bestBaseline ? bestBaseline.t.median / t.median : null };
    });
    const timed = rows.filter((row) => row.t).sort((a, b) => a.t.median - b.t.median);
    const within = bestBaseline ? timed.filter((row) => row.t.median <= WITHIN * bestBaseline.t.median).length : null;
    const failed = rows.filter((row) => row.m && row.m.status !== "ok").length;

    // Cards. The best is rank 1, what `dtx best` and /v1/best hand out (full-protocol times
    // rank before screening-only ones), which is not always the shortest bar.
    const best = rows.find((row) => row.s.rank === 1 && row.t) || timed[0];
    const metricLabel = (METRICS.find(([k]) => k === state.metric) || METRICS[0])[1];
    fill(summary,
      card("Best schedule", best ? ms(best.t.median) : "–",
        best ? h("a", { href: `/schedules/${best.s.schedule_id}` }, `schedule ${best.s.schedule_id}`) : "none measured yet"),
      card("Best baseline", bestBaseline ? ms(bestBaseline.t.median) : "–", bestBaseline ? bestBaseline.name : "no baseline measured"),
      card("Speed-up", best && bestBaseline ? ratio(bestBaseline.t.median / best.t.median) : "–", "best baseline ÷ best schedule"),
      card("Within 5% of the best baseline", within === null ? "–" : `${count(within)} of ${count(timed.length)}`,
        within === null || !timed.length ? "" : `${((100 * within) / timed.length).toFixed(1)}% of the measured schedules`, "within"),
      card("Space", spaceSize(x.space_size, x.space_overflowed), spaceNote(x, failed)));

    // Chart controls: built once (below), only their content changes, so the keyboard focus
    // stays where it is while a running exploration refreshes.
    const keys = (present.length ? present : METRICS.slice(0, 1)).map(([k]) => k).join();
    if (keys !== metricKeys) {
      metricKeys = keys;
      fill(metricSelect, (present.length ? present : METRICS.slice(0, 1)).map(([k, label, desc]) =>
        h("option", { value: k, title: desc }, label)));
    }
    metricSelect.value = state.metric;
    fill(chartInfo, `${count(timed.length)} schedules measured (${metricLabel}); error marks: 20th–80th percentile`);
    // Chart.
    fill(chartError);
    try {
      state.chart = drawChart(canvas, {
        existing: state.chart,
        bars: timed.map((row) => ({ label: row.s.canonical, ms: row.t.median, lo: row.t.lo, hi: row.t.hi, id: row.s.schedule_id })),
        baselines: baselines.filter((b) => b.t).map((b) => ({ name: b.name, ms: b.t.median, color: b.color })),
        log: state.log,
        unit: metricLabel,
        onPick: (bar) => navigate(`/schedules/${bar.id}`),
      });
    } catch (e) {
      fill(chartError, errorBox(e, "No chart"));
    }
    fill(legend, baselines.map((b) => h("li",
      h("span.swatch", { style: `background:${b.color}` }), " ", h("strong", b.name), " ",
      b.t ? ms(b.t.median) : b.m.status !== "ok" ? h("span.status-failed", `${b.m.status}: ${b.m.message}`) : "not measured with this time",
      b.m.protocol === "screen" ? h("span.muted", " (screening)") : null)));

    renderTable(rows);
  };

  const keepInUrl = () => {
    const q = new URLSearchParams(location.search);
    const set = (k, v, dflt) => (v === dflt ? q.delete(k) : q.set(k, v));
    set("metric", state.metric, "bench");
    set("log", state.log ? "1" : "0", "0");
    set("q", state.filter, "");
    set("status", state.status, "");
    history.replaceState(null, "", `${location.pathname}${q.toString() ? "?" + q : ""}${location.hash}`);
  };

  // The ranked table: its controls built once, its head and rows redrawn.
  let tableRows = [];
  const filterInput = h("input", { type: "search", id: "schedule-filter", placeholder: "statements contain…", value: state.filter });
  const statusSelect = h("select", { id: "status-filter" },
    [["", "any status"], ["ok", "ok"], ["failed", "failed"], ["unmeasured", "not measured"]]
      .map(([v, t]) => h("option", { value: v, selected: v === state.status }, t)));
  const compareBtn = h("button", { type: "button", id: "compare", disabled: true }, "Compare selected");
  compareBtn.addEventListener("click", () => {
    const [a, b] = [...state.selected];
    navigate(`/compare/${a}/${b}`);
  });
  const thead = h("thead");
  const body = h("tbody");
  const counter = h("span.muted.small-text");
  const more = h("div");
  fill(tableBox,
    h("div.table-controls",
      h("label", { for: "schedule-filter" }, "Filter"), filterInput,
      h("label", { for: "status-filter" }, "Status"), statusSelect,
      compareBtn, counter),
    h("div.table-scroll", h("table.data.ranked", h("caption.visually-hidden", "Schedules ranked by run time"), thead, body)),
    more);
  let debounce = null;
  filterInput.addEventListener("input", () => {
    clearTimeout(debounce);
    debounce = setTimeout(() => { state.filter = filterInput.value; keepInUrl(); fillBody(); }, 150);
  });
  statusSelect.addEventListener("change", () => { state.status = statusSelect.value; keepInUrl(); fillBody(); });

  const sortHeader = (key, label) => {
    const on = state.sort.key === key;
    return h("th", { scope: "col", "aria-sort": on ? (state.sort.dir > 0 ? "ascending" : "descending") : "none" },
      h("button.sort", { type: "button", dataset: { key, focus: `sort-${key}` }, onclick: () => {
        state.sort = { key, dir: on ? -state.sort.dir : 1 };
        renderTable(tableRows);
      } }, label, on ? (state.sort.dir > 0 ? " ▲" : " ▼") : ""));
  };
  const statusOf = (row) => (row.m ? row.m.status : "unmeasured");
  const fillBody = () => {
    const needle = state.filter.toLowerCase();
    let shown = tableRows.filter((row) => (!needle || row.s.canonical.toLowerCase().includes(needle)) &&
      (!state.status || (state.status === "failed" ? row.m && row.m.status !== "ok" : statusOf(row) === state.status)));
    const key = {
      rank: (row) => row.s.rank || Infinity,
      canonical: (row) => row.s.canonical,
      time: (row) => (row.t ? row.t.median : Infinity),
      speedup: (row) => (row.speedup === null ? -Infinity : row.speedup),
      status: statusOf,
    }[state.sort.key];
    shown = shown.slice().sort((a, b) => {
      const ka = key(a), kb = key(b);
      return (ka < kb ? -1 : ka > kb ? 1 : 0) * state.sort.dir;
    });
    fill(counter, `${count(shown.length)} of ${count(tableRows.length)} schedules`);
    compareBtn.disabled = state.selected.size !== 2;
    fill(body, shown.slice(0, state.rows).map((row) => {
      const sid = row.s.schedule_id;
      const box = h("input", { type: "checkbox", "aria-label": `select schedule ${sid}`, checked: state.selected.has(sid), dataset: { focus: `select-${sid}` } });
      box.addEventListener("change", () => {
        if (box.checked) state.selected.add(sid); else state.selected.delete(sid);
        while (state.selected.size > 2) state.selected.delete(state.selected.values().next().value);
        compareBtn.disabled = state.selected.size !== 2;
        for (const other of body.querySelectorAll("input[type=checkbox]"))
          other.checked = state.selected.has(Number(other.closest("tr").dataset.id));
      });
      const status = statusOf(row);
      return h("tr", { dataset: { id: sid, status, ms: row.t ? row.t.median : null } },
        h("td", box),
        h("td.num", row.s.rank ? String(row.s.rank) : "–"),
        h("td.canonical", h("a", { href: `/schedules/${sid}`, dataset: { focus: `schedule-${sid}` } }, h("code", row.s.canonical || "(the algorithm's own schedule)"))),
        h("td.num", row.t ? ms(row.t.median) : "–"),
        h("td.num.muted", row.t && row.t.lo !== null ? `${ms(row.t.lo)} – ${ms(row.t.hi)}` : ""),
        h("td.num", row.speedup ? h(`span.${row.speedup >= 1 / WITHIN ? "faster" : row.speedup >= 1 / WITHIN / WITHIN ? "close" : "slower"}`, ratio(row.speedup)) : "–"),
        h("td", row.m ? row.m.protocol : "–"),
        h("td", h(`span.status-${status === "ok" ? "ok" : status === "unmeasured" ? "none" : "failed"}`, status),
          row.m && row.m.status !== "ok" && row.m.message ? h("div.failure", row.m.message) : null));
    }));
    fill(more, shown.length > state.rows
      ? h("button", { type: "button", id: "more-rows", onclick: () => { state.rows += ROWS * 5; fillBody(); } }, `Show ${count(Math.min(ROWS * 5, shown.length - state.rows))} more`)
      : null);
  };
  const renderTable = (rows) => {
    tableRows = rows;
    keepFocus(tableBox, () => {
      fill(thead, h("tr",
        h("th", { scope: "col" }, h("span.visually-hidden", "select")),
        sortHeader("rank", "Rank"), sortHeader("canonical", "Schedule"), sortHeader("time", "Time"),
        h("th", { scope: "col" }, "q20–q80"), sortHeader("speedup", "vs best baseline"),
        h("th", { scope: "col" }, "Protocol"), sortHeader("status", "Status")));
      fillBody();
    });
  };

  const loadRanked = async () => {
    try {
      const [ranked, now] = await Promise.all([
        api.get(`/v1/explorations/${id}/schedules?limit=10000`),
        api.get(`/v1/explorations/${id}`),
      ]);
      state.ranked = ranked;
      // Counts (space, candidates, pruned) grow while it runs; the state comes from the events.
      x = { ...now, state: x.state === "queued" || x.state === "running" ? now.state : x.state };
    } catch (e) {
      fill(tableError, errorBox(e, "The schedules could not be loaded"));
      return;
    }
    fill(tableError);
    if (isCurrent()) renderResults();
  };

  renderHead();
  renderProgress();
  await loadRanked();

  // Live: progress from the events, the ranking refreshed at most every two seconds.
  let stop = null;
  let refresh = null;
  let lastRefresh = Date.now();
  if (x.state === "queued" || x.state === "running") {
    stop = follow(id, {
      onProgress: (p) => {
        if (!isCurrent()) return;
        if (x.state === "queued") { x.state = "running"; renderHead(); }
        x.progress = p;
        renderProgress(p);
        if (!refresh) {
          refresh = setTimeout(() => {
            refresh = null;
            lastRefresh = Date.now();
            loadRanked();
          }, Math.max(0, 2000 - (Date.now() - lastRefresh)));
        }
      },
      onDone: async (done) => {
        clearTimeout(refresh);
        if (!isCurrent()) return;
        try {
          x = await api.get(`/v1/explorations/${id}`);
        } catch {
          x = { ...x, ...done };
        }
        renderHead();
        renderProgress();
        await loadRanked();
        panel.dataset.finished = "yes";
      },
    });
  } else {
    panel.dataset.finished = "yes";
  }
  return () => {
    if (stop) stop();
    clearTimeout(refresh);
    if (state.chart) state.chart.destroy();
  };
}

/// Candidates and pruning; while the search runs, the counts so far from its progress.
function spaceNote(x, failed) {
  const running = (x.state === "running" || x.state === "queued") && x.progress;
  const parts = running
    ? [`${count(x.progress.proposed)} proposed so far`, `${count(x.progress.rejected)} pruned`]
    : [`${count(x.candidates)} candidates`,
      Object.entries(x.rejected || {}).map(([k, v]) => `${count(v)} pruned by ${k}`).join(" · ") || "none pruned"];
  if (failed) parts.push(`${count(failed)} failed`);
  return parts.join(" · ");
}

function card(title, value, note, name) {
  return h("div.card", { dataset: { card: name || title.toLowerCase().replace(/\W+/g, "-") } },
    h("div.card-title", title), h("div.card-value", value), h("div.card-note", note));
}
