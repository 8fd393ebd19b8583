// /explorations/ID[,ID...]: one exploration per shape (tabs when several): its state and
// progress, the thesis' chart, the ranked table, how easy the space is; live while it runs.
import { h, fill, ms, ratio, count, spaceSize, age, duration, badge, progressBar, errorBox, keepFocus } from "../dom.js";
import { api, follow } from "../api.js";
import { drawChart, baselineColor } from "../chart.js";
import { METRICS, timeOf } from "../measure.js";
import { PROTOCOLS, rowsOf, searchOf, rowTime, metricsIn, sampleSorted, importance, historyOf, failureGroups, valueColor, valueOrder } from "../analysis.js";
import { slicePlot, historyPlot, parallelPlot } from "../plots.js";
import { codeBlock } from "../highlight.js";

const WITHIN = 1.05; // the thesis' "competitive": within 5% of the best baseline
const ROWS = 100;      // table rows added at a time, as the table is scrolled
const MAX_BARS = 1500; // bars drawn at most: past that, an even sample of the sorted times

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
    // Tab labels: each exploration's shape, with its dtype and kernel where those tell tabs apart.
    const some = (f) => new Set(xs.filter(Boolean).map(f)).size > 1;
    const withDtype = some((xx) => xx.dtype), withKernel = some((xx) => xx.kernel);
    ids.forEach((id, i) => {
      const xx = xs[i];
      const label = xx ? [withKernel ? xx.kernel : null, xx.shape, withDtype ? xx.dtype : null].filter(Boolean).join(" · ") : `#${id}`;
      const b = h("button.tab", { role: "tab", type: "button", dataset: { id }, "aria-controls": `panel-${id}` }, label);
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
  document.title = `${x.kernel} ${x.shape} ${x.dtype} · exploration ${id} · dtx`;
  const state = {
    metric: query.get("metric") || "bench",
    log: query.get("log") === "1",
    filter: query.get("q") || "",
    status: query.get("status") || "",
    protocol: query.get("protocol") || "",
    colorBy: query.get("color") || "",
    slice: query.get("slice") || "",
    zoom: null, // [first, last] positions among the chart's sorted bars
    sort: { key: "rank", dir: 1 },
    rows: ROWS,
    selected: new Set(),
    cols: null,  // the API's columns
    all: [],     // rows of every schedule (analysis.js)
    chart: null,
    plots: [],
  };

  const head = h("div.exploration-head");
  const progress = h("div.progress-section", { "aria-live": "polite" });
  const summary = h("div.cards");
  const chartControls = h("div.chart-controls");
  const canvas = h("canvas", { id: `chart-${id}`, role: "img", "aria-label": "run time of every measured schedule, sorted, with the baselines as horizontal lines; drag across it to zoom" });
  const chartBox = h("div.chart-box", canvas);
  const chartError = h("div");
  const legend = h("ul.legend", { "aria-label": "baselines" });
  const colorLegend = h("ul.legend.color-legend", { "aria-label": "colours" });
  const explain = h("div.explain");
  const historyBox = h("div");
  const failuresBox = h("div", { id: `failures-${id}` });
  const tableBox = h("div");
  const tableError = h("div");
  const details = h("details.source",
    h("summary", "Algorithm and schedule template"),
    h("div.two-columns",
      h("div", h("h3", "Algorithm"), codeBlock(x.algorithm || "", "dt", "algorithm")),
      h("div", h("h3", "Template"), codeBlock(x.template || "", "dt", "schedule template"))));
  fill(panel, head, progress, summary,
    h("section.chart-section", { "aria-label": "chart" }, h("h2", "Schedules by run time"), chartControls, chartError, chartBox, legend, colorLegend),
    h("section", { "aria-label": "ranked schedules" }, h("h2", "Ranked schedules"), tableError, tableBox),
    h("section.explain-section", { "aria-label": "what decides the time" }, h("h2", "What decides the time"), explain),
    h("section.history-section", { "aria-label": "history" }, h("h2", "History"), historyBox),
    h("section.failures-section", { "aria-label": "failures" }, h("h2", "Failures by reason"), failuresBox),
    details);

  // Chart controls, built once: only their content changes, so the keyboard focus stays.
  const protocolSelect = h("select", { id: "protocol" });
  protocolSelect.addEventListener("change", () => { state.protocol = protocolSelect.value; state.zoom = null; keepInUrl(); renderResults(); });
  const metricSelect = h("select", { id: "metric" });
  let metricKeys = "";
  metricSelect.addEventListener("change", () => { state.metric = metricSelect.value; keepInUrl(); renderResults(); });
  const logBox = h("input", { type: "checkbox", id: "log-scale", checked: state.log });
  logBox.addEventListener("change", () => { state.log = logBox.checked; keepInUrl(); renderResults(); });
  const colorSelect = h("select", { id: "color-by" });
  let colorKeys = null;
  colorSelect.addEventListener("change", () => { state.colorBy = colorSelect.value; keepInUrl(); renderResults(); });
  const resetZoom = h("button.small", { type: "button", id: "reset-zoom", hidden: true }, "Reset zoom");
  resetZoom.addEventListener("click", () => { state.zoom = null; renderResults(); });
  const chartInfo = h("span.muted.small-text", { id: `chart-info-${id}` });
  fill(chartControls,
    h("label", { for: "protocol" }, "Protocol"), protocolSelect,
    h("label", { for: "metric" }, "Time"), metricSelect,
    h("label.check", logBox, " log scale"),
    h("label", { for: "color-by" }, "Colour by"), colorSelect,
    resetZoom, chartInfo);

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

  // Elapsed time: the last one the server gave, moved on by the clock while it runs.
  let elapsedAt = { s: x.progress ? x.progress.elapsed_s : null, t: Date.now() };
  const elapsedSpan = h("span", { id: `elapsed-${id}` });
  const tickElapsed = () => {
    const active = x.state === "queued" || x.state === "running";
    if (elapsedAt.s === null || elapsedAt.s === undefined) return fill(elapsedSpan);
    const s = elapsedAt.s + (active && x.state === "running" ? (Date.now() - elapsedAt.t) / 1000 : 0);
    fill(elapsedSpan, ` · ${duration(s)}`);
  };
  const ticker = setInterval(tickElapsed, 1000);

  const renderHead = () => keepFocus(head, () => {
    const active = x.state === "queued" || x.state === "running";
    tickElapsed();
    fill(head,
      h("div.page-head",
        h("h1", h("a.plain", { href: `/explorations?kernel=${encodeURIComponent(x.kernel)}` }, x.kernel), " at ", h("code", x.shape), " ", h("span.dtype", x.dtype)),
        badge(x.state),
        active ? h("button.danger", { type: "button", id: "cancel", onclick: (e) => cancel(e.target) }, "Cancel") : null),
      h("p.meta",
        `exploration ${x.id} · ${x.dtype} · ${x.strategy}` + (x.budget ? ` (budget ${count(x.budget)})` : "") +
        ` · ${x.device || "device not known yet"} · created ${age(x.created_at)}`,
        elapsedSpan),
      x.message ? h(`p.${x.state === "failed" ? "error-box" : "muted"}`, x.message) : null);
  });

  const renderProgress = (p) => {
    const active = x.state === "queued" || x.state === "running";
    if (!active) return fill(progress);
    const q = p || x.progress;
    if (q) elapsedAt = { s: q.elapsed_s, t: Date.now() };
    tickElapsed();
    const [done, total] = phaseProgress({ ...x, progress: q });
    fill(progress, progressBar(done, total, `${q ? phaseName(q.phase) : "queued"} progress`),
      h("p.small-text", { id: `progress-text-${id}` }, q
        ? `${phaseText(q, x)} · ${count(q.done)} measured · ${count(q.rejected)} pruned · ${count(q.duplicates)} duplicates · ${count(q.reused)} reused · ${count(q.failed)} failed` +
          (q.eta_s ? ` · about ${duration(q.eta_s)} left in this phase` : "") +
          (q.best_ms ? ` · best so far ${ms(q.best_ms)}` : "")
        : "queued: waiting for a turn on the workers"));
  };

  // Rows after the table's filters: what the chart, the table and the plots show.
  const filtered = () => {
    const needle = state.filter.trim().toLowerCase();
    const vars = (state.cols && state.cols.variables) || [];
    return state.all.filter((row) => (!needle || searchOf(row, vars).includes(needle)) &&
      (!state.status || (state.status === "failed" ? row.status !== "ok" && row.status !== "unmeasured" : row.status === state.status)));
  };

  // Everything that depends on the schedules, the protocol and the metric.
  const renderResults = () => {
    const cols = state.cols;
    if (!cols) return;
    const all = state.all;
    const vars = cols.variables || [];
    // The protocol every comparison uses: screening, where every schedule was screened; the
    // full protocol where only that was run.
    const protocolsPresent = PROTOCOLS.filter(([p]) => all.some((r) => r[p]) || (cols.baselines || []).some((b) => b.measurement.protocol === p && b.measurement.status === "ok"));
    if (!protocolsPresent.some(([p]) => p === state.protocol))
      state.protocol = protocolsPresent.length ? (protocolsPresent.some(([p]) => p === "screen") && all.some((r) => r.screen) ? "screen" : protocolsPresent[0][0]) : "screen";
    const P = state.protocol;
    fill(protocolSelect, (protocolsPresent.length ? protocolsPresent : PROTOCOLS.slice(0, 1)).map(([k, label]) => h("option", { value: k }, label)));
    protocolSelect.value = P;
    const present = metricsIn(all, P, METRICS);
    if (present.length && !present.some(([k]) => k === state.metric)) state.metric = present[0][0];
    const keys = (present.length ? present : METRICS.slice(0, 1)).map(([k]) => k).join();
    if (keys !== metricKeys) {
      metricKeys = keys;
      fill(metricSelect, (present.length ? present : METRICS.slice(0, 1)).map(([k, label, desc]) =>
        h("option", { value: k, title: desc }, label)));
    }
    metricSelect.value = state.metric;
    const ck = vars.map((v) => v.name).join("\n");
    if (ck !== colorKeys) {
      colorKeys = ck;
      fill(colorSelect, h("option", { value: "" }, "the fastest"), vars.map((v) => h("option", { value: v.name }, v.name)));
    }
    if (state.colorBy && !vars.some((v) => v.name === state.colorBy)) state.colorBy = "";
    colorSelect.value = state.colorBy;
    const metricLabel = (METRICS.find(([k]) => k === state.metric) || METRICS[0])[1];

    // Baselines of the chosen protocol; the best schedule's own protocol for the cards.
    const baselinesOf = (p) => {
      const byName = new Map();
      for (const b of cols.baselines || []) if (b.measurement.protocol === p) byName.set(b.name, b.measurement);
      return [...byName.entries()].map(([name, m]) => ({ name, m, t: timeOf(m, state.metric) }));
    };
    const names = [...new Set((cols.baselines || []).map((b) => b.name))];
    const color = (name) => baselineColor(names.indexOf(name));
    const fastest = (list) => list.filter((b) => b.t).sort((a, b) => a.t.median - b.t.median)[0] || null;
    const baselines = baselinesOf(P).map((b) => ({ ...b, color: color(b.name) }));
    const bestBaseline = fastest(baselines);

    const rows = filtered();
    const timeP = (r) => rowTime(r, P, state.metric);
    const timed = rows.filter((r) => timeP(r)).map((r) => ({ r, t: timeP(r) })).sort((a, b) => a.t.median - b.t.median);

    // Cards: the best is rank 1 (what `dtx best` hands out), compared under its own protocol.
    const rank1 = all.find((r) => r.rank === 1);
    const bestP = rank1 ? (rank1.full ? "full" : "screen") : null;
    const bestT = rank1 ? rowTime(rank1, bestP, state.metric) : null;
    const blSame = bestP ? fastest(baselinesOf(bestP)) : null;
    const blOther = bestP ? fastest(baselinesOf(bestP === "full" ? "screen" : "full")) : null;
    const within = bestBaseline ? timed.filter((e) => e.t.median <= WITHIN * bestBaseline.t.median).length : null;
    const failed = all.filter((r) => r.status !== "ok" && r.status !== "unmeasured").length;
    const pname = (p) => (p === "full" ? "full protocol" : "screening");
    fill(summary,
      card("Best schedule", bestT ? ms(bestT.median) : "–",
        rank1 ? [h("a", { href: `/schedules/${rank1.id}` }, `schedule ${rank1.id}`), ` · rank 1 · ${pname(bestP)}`] : "none measured yet"),
      card("Best baseline", blSame ? ms(blSame.t.median) : "–",
        blSame ? `${blSame.name} · ${pname(bestP)}`
          : blOther ? `none with the ${pname(bestP)}; ${blOther.name} has only a ${pname(bestP === "full" ? "screen" : "full")} time (${ms(blOther.t.median)}), not compared` : "no baseline measured"),
      card("Speed-up", bestT && blSame ? speedupText(blSame.t.median / bestT.median) : "–",
        bestT && blSame ? `best baseline ÷ best schedule, both ${pname(bestP)}`
          : bestT && blOther ? `not compared: the best schedule has a ${pname(bestP)} time, the baselines only ${pname(bestP === "full" ? "screen" : "full")} ones` : "best baseline ÷ best schedule"),
      card("Within 5% of the best baseline", within === null ? "–" : `${count(within)} of ${count(timed.length)}`,
        within === null || !timed.length ? `${pname(P)}` : `${((100 * within) / timed.length).toFixed(1)}% of the schedules with a ${pname(P)} time`, "within"),
      card("Space", spaceSize(x.space_size, x.space_overflowed), spaceNote(x, failed)));

    // The chart: the filtered schedules of one protocol, sorted; past MAX_BARS an even sample
    // of them (the best always); a drag zooms into a range, drawn in full up to MAX_BARS.
    const colorVar = vars.findIndex((v) => v.name === state.colorBy);
    let zoomed = timed;
    if (state.zoom) {
      const [a, b] = state.zoom;
      zoomed = timed.slice(Math.max(0, a), Math.min(timed.length, b + 1));
    }
    const offsetAt = state.zoom ? Math.max(0, state.zoom[0]) : 0;
    const sample = sampleSorted(zoomed, MAX_BARS);
    const bars = sample.map(({ item: e, at }) => ({
      label: e.r.canonical, ms: e.t.median, lo: e.t.lo, hi: e.t.hi, id: e.r.id, at: at + offsetAt,
      rank: e.r.rank, protocol: P,
      color: colorVar >= 0 ? valueColor(e.r.vars[colorVar]) : undefined,
      value: colorVar >= 0 ? `${vars[colorVar].name} = ${e.r.vars[colorVar] === null ? "(not used)" : vars[colorVar].values[e.r.vars[colorVar]]}` : undefined,
    }));
    resetZoom.hidden = !state.zoom;
    fill(chartInfo, `${count(timed.length)} schedules with a ${pname(P)} time` +
      (rows.length !== all.length ? ` (filtered from ${count(all.length)})` : "") +
      (state.zoom ? `; zoomed to ${count(offsetAt + 1)}–${count(offsetAt + zoomed.length)}` : "") +
      (sample.length < zoomed.length ? `; ${count(sample.length)} drawn, evenly spaced, the fastest always` : "") +
      `; ${metricLabel}; error marks: 20th–80th percentile; drag across the chart to zoom`);
    canvas.dataset.protocol = P;
    canvas.dataset.total = String(timed.length);
    canvas.dataset.zoom = state.zoom ? state.zoom.join("-") : "";
    fill(chartError);
    try {
      state.chart = drawChart(canvas, {
        existing: state.chart,
        bars,
        baselines: baselines.filter((b) => b.t).map((b) => ({ name: b.name, ms: b.t.median, color: b.color })),
        log: state.log,
        unit: metricLabel,
        title: `schedules, sorted by ${pname(P)} time`,
        onPick: (bar) => navigate(`/schedules/${bar.id}`),
        onSelect: (first, last) => {
          const at = (k) => bars[k].at;
          state.zoom = [at(first), at(last)];
          if (state.zoom[1] - state.zoom[0] < 1) state.zoom = null;
          renderResults();
        },
      });
    } catch (e) {
      fill(chartError, errorBox(e, "No chart"));
    }
    fill(legend, (cols.baselines || []).length ? names.map((name) => {
      const b = baselines.find((bb) => bb.name === name);
      const any = (cols.baselines || []).filter((bb) => bb.name === name).map((bb) => bb.measurement);
      const failedM = any.find((m) => m.status !== "ok");
      return h("li",
        h("span.swatch", { style: `background:${color(name)}` }), " ", h("strong", name), " ",
        b && b.t ? ms(b.t.median) : failedM ? h("span.status-failed", `${failedM.status}: ${failedM.message}`) : `not measured with the ${pname(P)}`,
        h("span.muted", ` (${pname(P)})`));
    }) : null);
    fill(colorLegend, colorVar >= 0 ? valueOrder(vars[colorVar]).map((k) => h("li",
      h("span.swatch.dot", { style: `background:${valueColor(k)}` }), ` ${vars[colorVar].name} = ${vars[colorVar].values[k]}`)) : null);

    renderTable(rows, { P, bestBaseline, vars });
    scheduleExplain(rows, P, metricLabel);
  };

  // The plots below the table are drawn after the chart and the table are on screen.
  let explainTimer = null;
  const scheduleExplain = (rows, P, metricLabel) => {
    clearTimeout(explainTimer);
    explainTimer = setTimeout(() => { if (isCurrent()) renderExplain(rows, P, metricLabel); }, 30);
  };
  const sliceSelect = h("select", { id: `slice-${id}` });
  sliceSelect.addEventListener("change", () => { state.slice = sliceSelect.value; keepInUrl(); renderResults(); });
  const renderExplain = (rows, P, metricLabel) => {
    state.plots.forEach((c) => c.destroy());
    state.plots = [];
    const cols = state.cols;
    const vars = cols.variables || [];
    const times = rows.map((r) => { const t = rowTime(r, P, state.metric); return t ? t.median : null; });
    const pick = (row) => navigate(`/schedules/${row.id}`);
    try {
      if (!vars.length) {
        fill(explain, h("p.muted", "The template has no variables to compare (or its space could not be rebuilt)."));
      } else {
        const imp = importance(rows, times, vars);
        const impList = h("ol.importance", { id: `importance-${id}`, "aria-label": "variables by how much of the time they explain" },
          imp.map((e) => h("li", { dataset: { name: e.name, share: e.share.toFixed(4) } },
            h("span.imp-name", h("code", e.name)),
            h("span.imp-bar", h("span.imp-fill", { style: `width:${(100 * e.share).toFixed(1)}%` })),
            h("span.imp-share", `${(100 * e.share).toFixed(1)}%`))));
        if (!state.slice || !vars.some((v) => v.name === state.slice)) state.slice = imp.length ? imp[0].name : vars[0].name;
        fill(sliceSelect, vars.map((v) => h("option", { value: v.name }, v.name)));
        sliceSelect.value = state.slice;
        const k = vars.findIndex((v) => v.name === state.slice);
        const sliceCanvas = h("canvas", { id: `slice-chart-${id}`, role: "img", "aria-label": `time against ${state.slice}` });
        const parCanvas = h("canvas.parallel", { id: `parallel-${id}`, role: "img", "aria-label": "parallel coordinates: every schedule a line through its variables' values to its time" });
        fill(explain,
          h("div.explain-grid",
            h("div", h("h3", "Importance"),
              h("p.muted.small-text", `Share of the variance of log ${pname2(P)} time that each variable explains on its own (first-order effects, fANOVA-style), over ${count(times.filter((t) => t !== null).length)} schedules.`),
              impList),
            h("div", h("div.inline-controls", h("label", { for: `slice-${id}` }, "Time against"), sliceSelect),
              h("div.plot-box", sliceCanvas))),
          h("h3", "Parallel coordinates"),
          h("p.muted.small-text", "Every schedule a line through its variables' values to its time (fast: dark blue, drawn on top; slow: light)."),
          h("div.plot-box.tall", parCanvas));
        state.plots.push(slicePlot(sliceCanvas, { variable: vars[k], k, rows, times, log: state.log, unit: metricLabel, onPick: pick }));
        parallelPlot(parCanvas, { variables: vars, rows, times, log: state.log });
      }
      const history = historyOf(rows, times);
      const histCanvas = h("canvas", { id: `history-${id}`, role: "img", "aria-label": "time and best so far in measurement order" });
      const last = history.length ? history[history.length - 1].best : null;
      const firstAtBest = history.findIndex((e) => e.best === last);
      fill(historyBox,
        history.length ? h("p.muted.small-text", `${count(history.length)} schedules with a ${pname2(P)} time, in the order they were measured; the best was found at the ${count(firstAtBest + 1)}${ordinal(firstAtBest + 1)}.`) : h("p.muted", "Nothing measured yet."),
        history.length ? h("div.plot-box", histCanvas) : null);
      if (history.length) state.plots.push(historyPlot(histCanvas, { history, log: state.log, unit: metricLabel, onPick: pick }));
    } catch (e) {
      fill(explain, errorBox(e, "No plots"));
    }
    renderFailures();
  };

  const renderFailures = () => {
    const groups = failureGroups(state.all);
    if (!groups.length) return fill(failuresBox, h("p.muted", "No schedule failed."));
    const total = groups.reduce((a, g) => a + g.rows.length, 0);
    fill(failuresBox,
      h("p.muted.small-text", `${count(total)} failed schedules, ${count(groups.length)} reasons`),
      groups.map((g) => h("details.failure-group", { dataset: { status: g.status, count: g.rows.length } },
        h("summary", h("span.status-failed", g.status), " ", h("span.count", count(g.rows.length)), " ", h("span.failure-reason", g.reason || "(no message)")),
        h("ul.failure-list", g.rows.slice(0, 200).map((r) => h("li",
          h("a", { href: `/schedules/${r.id}` }, `schedule ${r.id}`), " ", statementsOf(r.canonical),
          r.message ? h("div.failure", r.message) : null)),
        g.rows.length > 200 ? h("li.muted", `and ${count(g.rows.length - 200)} more (filter the table by status)`) : null))));
  };

  const keepInUrl = () => {
    const q = new URLSearchParams(location.search);
    const set = (k, v, dflt) => (v === dflt ? q.delete(k) : q.set(k, v));
    set("metric", state.metric, "bench");
    set("log", state.log ? "1" : "0", "0");
    set("q", state.filter, "");
    set("status", state.status, "");
    set("protocol", state.protocol, "");
    set("color", state.colorBy, "");
    set("slice", state.slice, "");
    history.replaceState(null, "", `${location.pathname}${q.toString() ? "?" + q : ""}${location.hash}`);
  };

  // The ranked table: its controls built once, its head and rows redrawn. Rows are added as
  // the table's box is scrolled, ROWS at a time: 50,000 schedules are not 50,000 rows.
  let tableRows = [];
  let tableCtx = { P: "screen", bestBaseline: null, vars: [] };
  const filterInput = h("input", { type: "search", id: "schedule-filter", placeholder: "statements or variables, as num_warps(4)…", value: state.filter });
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
  const counter = h("span.muted.small-text", { id: `table-count-${id}` });
  const scroller = h("div.table-scroll.ranked-scroll", { tabindex: "0", role: "region", "aria-label": "ranked schedules (scroll for more)" },
    h("table.data.ranked", h("caption.visually-hidden", "Schedules ranked by run time"), thead, body));
  fill(tableBox,
    h("div.table-controls",
      h("label", { for: "schedule-filter" }, "Filter"), filterInput,
      h("label", { for: "status-filter" }, "Status"), statusSelect,
      compareBtn, counter),
    scroller);
  let debounce = null;
  filterInput.addEventListener("input", () => {
    clearTimeout(debounce);
    debounce = setTimeout(() => { state.filter = filterInput.value; state.zoom = null; keepInUrl(); renderResults(); }, 150);
  });
  statusSelect.addEventListener("change", () => { state.status = statusSelect.value; state.zoom = null; keepInUrl(); renderResults(); });
  scroller.addEventListener("scroll", () => {
    if (scroller.scrollTop + scroller.clientHeight >= scroller.scrollHeight - 200 && state.rows < sortedRows.length) {
      state.rows += ROWS;
      appendRows();
    }
  });

  const sortHeader = (key, label, extra) => {
    const on = state.sort.key === key;
    return h("th", { scope: "col", "aria-sort": on ? (state.sort.dir > 0 ? "ascending" : "descending") : "none", ...(extra || {}) },
      h("button.sort", { type: "button", dataset: { key, focus: `sort-${key}` }, onclick: () => {
        state.sort = { key, dir: on ? -state.sort.dir : 1 };
        renderTable(tableRows, tableCtx);
      } }, label, on ? (state.sort.dir > 0 ? " ▲" : " ▼") : ""));
  };
  const speedupOf = (row) => {
    const t = rowTime(row, tableCtx.P, state.metric);
    return t && tableCtx.bestBaseline ? tableCtx.bestBaseline.t.median / t.median : null;
  };
  const numberOrText = (v) => (v !== null && v !== undefined && /^-?\d+(\.\d+)?$/.test(v) ? Number(v) : v ?? "");
  let sortedRows = [];
  let drawn = 0;
  const fillBody = () => {
    const vars = tableCtx.vars;
    const metricT = (p) => (row) => { const t = rowTime(row, p, state.metric); return t ? t.median : Infinity; };
    const keyFns = {
      rank: (row) => row.rank || Infinity,
      canonical: (row) => row.canonical,
      screen: metricT("screen"),
      full: metricT("full"),
      delta: (row) => { const d = deltaOf(row, state.metric); return d === null ? Infinity : d; },
      speedup: (row) => { const s = speedupOf(row); return s === null ? -Infinity : s; },
      status: (row) => row.status,
    };
    vars.forEach((v, k) => { keyFns[`var-${k}`] = (row) => (row.vars[k] === null ? "" : numberOrText(v.values[row.vars[k]])); });
    const key = keyFns[state.sort.key] || keyFns.rank;
    sortedRows = state.sort.key === "rank" && state.sort.dir === 1 ? tableRows.slice() : tableRows.slice().sort((a, b) => {
      const ka = key(a), kb = key(b);
      if (typeof ka !== typeof kb) return (typeof ka === "number" ? -1 : 1) * state.sort.dir;
      return (ka < kb ? -1 : ka > kb ? 1 : 0) * state.sort.dir;
    });
    fill(counter, `${count(sortedRows.length)} of ${count(state.all.length)} schedules`);
    compareBtn.disabled = state.selected.size !== 2;
    fill(body);
    drawn = 0;
    appendRows();
  };
  const appendRows = () => {
    const until = Math.min(sortedRows.length, state.rows);
    const frag = document.createDocumentFragment();
    for (; drawn < until; drawn++) frag.append(rowElement(sortedRows[drawn]));
    body.append(frag);
    body.dataset.drawn = String(drawn);
  };
  const rowElement = (row) => {
    const sid = row.id;
    const box = h("input", { type: "checkbox", "aria-label": `select schedule ${sid}`, checked: state.selected.has(sid), dataset: { focus: `select-${sid}` } });
    box.addEventListener("change", () => {
      if (box.checked) state.selected.add(sid); else state.selected.delete(sid);
      while (state.selected.size > 2) state.selected.delete(state.selected.values().next().value);
      compareBtn.disabled = state.selected.size !== 2;
      for (const other of body.querySelectorAll("input[type=checkbox]"))
        other.checked = state.selected.has(Number(other.closest("tr").dataset.id));
    });
    const P = tableCtx.P;
    const tP = rowTime(row, P, state.metric);
    const ts = rowTime(row, "screen", state.metric), tf = rowTime(row, "full", state.metric);
    const d = deltaOf(row, state.metric);
    const sp = speedupOf(row);
    const status = row.status;
    return h("tr", { dataset: { id: sid, status, ms: tP ? tP.median : null, rank: row.rank } },
      h("td", box),
      h("td.num", row.rank ? String(row.rank) : "–"),
      h("td.canonical", h("a", { href: `/schedules/${sid}`, dataset: { focus: `schedule-${sid}` } }, statementsOf(row.canonical))),
      tableCtx.vars.map((v, k) => h("td.var", { dataset: { var: v.name } }, row.vars[k] === null ? h("span.muted", "–") : v.values[row.vars[k]])),
      h("td.num", { dataset: { col: "screen" } }, ts ? ms(ts.median) : "–", ts && ts.lo !== null && ts.lo !== undefined ? h("div.muted.small-text", `${ms(ts.lo)} – ${ms(ts.hi)}`) : null),
      h("td.num", { dataset: { col: "full" } }, tf ? ms(tf.median) : h("span.muted", row.screen ? "screened only" : "–"),
        tf && tf.lo !== null && tf.lo !== undefined ? h("div.muted.small-text", `${ms(tf.lo)} – ${ms(tf.hi)}`) : null),
      h("td.num", { dataset: { col: "delta" } }, d === null ? "–" : `${d >= 0 ? "+" : ""}${(100 * d).toFixed(1)}%`),
      h("td.num", { dataset: { col: "speedup" } }, sp ? speedupText(sp) : tP || !row[P === "full" ? "screen" : "full"] ? "–" : h("span.muted", `no ${P === "full" ? "full" : "screening"} time`)),
      h("td", h(`span.status-${status === "ok" ? "ok" : status === "unmeasured" ? "none" : "failed"}`, status),
        row.status !== "ok" && row.message ? h("div.failure", row.message) : null));
  };
  const renderTable = (rows, ctx) => {
    tableRows = rows;
    tableCtx = ctx;
    const pname = (p) => (p === "full" ? "full protocol" : "screening");
    keepFocus(tableBox, () => {
      fill(thead, h("tr",
        h("th", { scope: "col" }, h("span.visually-hidden", "select")),
        sortHeader("rank", "Rank"), sortHeader("canonical", "Schedule"),
        ctx.vars.map((v, k) => sortHeader(`var-${k}`, v.name, { class: "var" })),
        sortHeader("screen", "Screen"), sortHeader("full", "Full"),
        sortHeader("delta", "Full vs screen"),
        sortHeader("speedup", `vs best baseline (${pname(ctx.P)})`), sortHeader("status", "Status")));
      fillBody();
    });
  };

  const loadRanked = async () => {
    try {
      const [cols, now] = await Promise.all([
        api.get(`/v1/explorations/${id}/columns`),
        api.get(`/v1/explorations/${id}`),
      ]);
      state.cols = cols;
      state.all = rowsOf(cols);
      // Counts (space, candidates, pruned) grow while it runs; the state comes from the events.
      x = { ...now, state: x.state === "queued" || x.state === "running" ? now.state : x.state };
    } catch (e) {
      fill(tableError, errorBox(e, "The schedules could not be loaded"));
      return;
    }
    fill(tableError);
    if (!isCurrent()) return;
    renderResults();
    if (!panel.dataset.shown) {
      panel.dataset.shown = "yes";
      performance.mark("dtx-results"); // the chart and the table are drawn (tests time it)
    }
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
    clearTimeout(explainTimer);
    clearInterval(ticker);
    if (state.chart) state.chart.destroy();
    state.plots.forEach((c) => c.destroy());
  };
}

const pname2 = (p) => (p === "full" ? "full-protocol" : "screening");
const ordinal = (n) => (n % 100 >= 11 && n % 100 <= 13 ? "th" : ["th", "st", "nd", "rd"][n % 10] || "th");

/// (full − screen) / screen of a row's times, or null without both.
function deltaOf(row, metric) {
  const s = rowTime(row, "screen", metric), f = rowTime(row, "full", metric);
  return s && f ? (f.median - s.median) / s.median : null;
}

/// A speed-up over a baseline: faster (≥ 1), within 5% below, or a loss, marked as such.
function speedupText(v) {
  if (v >= 1) return h("span.faster", { title: "faster than the best baseline" }, ratio(v));
  if (v >= 1 / WITHIN) return h("span.close", { title: "within 5% of the best baseline, slower" }, ratio(v));
  return h("span.loss", { title: "slower than the best baseline" }, "▼ ", ratio(v));
}

/// A schedule's statements, each kept whole on its line: lines break only after a `;`.
function statementsOf(canonical) {
  if (!canonical) return h("code", "(the algorithm's own schedule)");
  const parts = canonical.split(";").filter((s) => s.trim());
  return h("code.statements", parts.map((s, i) => h("span.stmt", s.trim() + (i < parts.length - 1 ? ";" : ""))));
}

/// The current phase's progress: [done, total] (total 0: not known).
function phaseProgress(x) {
  const p = x.progress;
  if (p && p.phase_total !== undefined && p.phase_total > 0) return [p.phase_done, p.phase_total];
  if (p && p.phase === "search" && p.budget) return [p.done, p.budget];
  return [0, 0];
}

function phaseName(phase) {
  return { baselines: "baselines", search: "search", full: "full protocol", done: "done" }[phase] || phase;
}

function phaseText(p, x) {
  const [done, total] = phaseProgress({ ...x, progress: p });
  if (p.phase === "baselines") return `baselines: ${count(done)} of ${count(total)} measured`;
  if (p.phase === "full") return `full protocol: ${count(done)} of ${count(total)} timings (rounds × schedules and baselines)`;
  if (p.phase === "search") return total ? `search: ${count(done)} of ${count(total)} (the budget) measured` : `search: ${count(p.done)} measured, no budget`;
  return phaseName(p.phase);
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
