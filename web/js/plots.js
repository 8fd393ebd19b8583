// The plots that explain a time: a slice plot per template variable (time against its values),
// the history of the search (time and best so far in measurement order), both with Chart.js;
// and parallel coordinates (one axis per variable and one for the time, a line per schedule),
// drawn on a canvas by hand: Chart.js 3.9 has no parallel-coordinates chart and Debian packages
// no library that draws one.
import { themeColors, applyTheme } from "./chart.js";
import { valueColor, valueOrder } from "./analysis.js";

const MAX_POINTS = 3000; // per plot: beyond that, an even sample (the best always kept)

function hash(n) {
  // A fixed jitter per schedule, so that points do not move between redraws.
  let x = (n * 2654435761) >>> 0;
  x ^= x >>> 16;
  return (x % 1000) / 1000;
}

/// Keeps at most `max` of `points` (sorted by time first), the fastest ones always.
function thin(points, max) {
  if (points.length <= max) return points;
  const sorted = points.slice().sort((a, b) => a.y - b.y);
  const keep = sorted.slice(0, 50);
  const rest = sorted.slice(50);
  const step = rest.length / (max - 50);
  for (let k = 0; k < max - 50; k++) keep.push(rest[Math.floor(k * step)]);
  return keep;
}

/// Time against the values of variable `k`: every schedule a point (jittered within its value),
/// the best of each value joined by a line. Returns the Chart.
export function slicePlot(canvas, { variable, k, rows, times, log, unit, onPick }) {
  applyTheme();
  const order = valueOrder(variable);
  const pos = new Map(order.map((vk, p) => [vk, p]));
  const unused = order.length;
  const points = [];
  const best = new Map();
  rows.forEach((r, i) => {
    const t = times[i];
    if (t === null || t === undefined) return;
    const vk = r.vars[k];
    const p = vk === null || vk === undefined ? unused : pos.get(vk);
    points.push({ x: p + (hash(r.id) - 0.5) * 0.6, y: t, row: r });
    if (!best.has(p) || t < best.get(p)) best.set(p, t);
  });
  const anyUnused = best.has(unused);
  const labels = order.map((vk) => variable.values[vk]).concat(anyUnused ? ["(not used)"] : []);
  const shown = thin(points, MAX_POINTS);
  const chart = new Chart(canvas, {
    type: "scatter",
    data: {
      datasets: [
        { label: "best of each value", type: "line", data: [...best.entries()].sort((a, b) => a[0] - b[0]).map(([x, y]) => ({ x, y })),
          borderColor: themeColors().best, backgroundColor: themeColors().best, pointRadius: 4, borderWidth: 2, order: 0 },
        { label: "schedules", data: shown, pointRadius: 2, order: 1,
          backgroundColor: shown.map((p) => valueColor(p.row.vars[k])) },
      ],
    },
    options: {
      animation: false, responsive: true, maintainAspectRatio: false,
      scales: {
        x: { type: "linear", min: -0.5, max: labels.length - 0.5,
          // A tick at each value (the axis would otherwise put them at -0.5, 0.5, ...).
          afterBuildTicks: (axis) => { axis.ticks = labels.map((_, i) => ({ value: i })); },
          ticks: { autoSkip: false, callback: (v) => labels[v] ?? "" },
          title: { display: true, text: variable.name }, grid: { display: false } },
        y: { type: log ? "logarithmic" : "linear", beginAtZero: !log, title: { display: true, text: `ms (${unit})` } },
      },
      plugins: {
        legend: { display: false },
        tooltip: { callbacks: {
          title: (items) => {
            const p = items[0].raw;
            return p.row ? `rank ${p.row.rank || "–"} · ${variable.name} = ${labels[Math.round(p.x)]}` : `best at ${variable.name} = ${labels[p.x]}`;
          },
          label: (item) => `${item.raw.y.toPrecision(4)} ms`,
          afterLabel: (item) => (item.raw.row ? item.raw.row.canonical.split(";").join(";\n") : ""),
        } },
      },
      onClick: (_e, els) => {
        const p = els.length && els[0].datasetIndex === 1 ? shown[els[0].index] : null;
        if (p && onPick) onPick(p.row);
      },
    },
  });
  canvas.dataset.points = String(shown.length);
  canvas.dataset.values = labels.join("|");
  canvas.dataset.best = order.map((_, p) => (best.has(p) ? best.get(p) : "")).join("|");
  return chart;
}

/// Time and best so far against measurement order. `history`: [{n, ms, best, row}].
export function historyPlot(canvas, { history, log, unit, onPick }) {
  applyTheme();
  const t = themeColors();
  const pts = history.map((e) => ({ x: e.n, y: e.ms, row: e.row }));
  const shown = pts.length > MAX_POINTS ? thin(pts, MAX_POINTS).sort((a, b) => a.x - b.x) : pts;
  // The best-so-far line only changes at improvements: its steps are all there is to draw.
  const steps = [];
  history.forEach((e, i) => { if (i === 0 || e.best < history[i - 1].best) steps.push({ x: e.n, y: e.best }); });
  if (history.length) steps.push({ x: history[history.length - 1].n, y: history[history.length - 1].best });
  const chart = new Chart(canvas, {
    type: "scatter",
    data: {
      datasets: [
        { label: "best so far", type: "line", data: steps, stepped: "before", borderColor: t.best, pointRadius: 0, borderWidth: 2, order: 0 },
        { label: "time", data: shown, pointRadius: 2, backgroundColor: t.bar, order: 1 },
      ],
    },
    options: {
      animation: false, responsive: true, maintainAspectRatio: false,
      scales: {
        x: { type: "linear", min: 1, title: { display: true, text: "measured, in order" } },
        y: { type: log ? "logarithmic" : "linear", beginAtZero: !log, title: { display: true, text: `ms (${unit})` } },
      },
      plugins: {
        legend: { display: true, position: "top" },
        tooltip: { callbacks: {
          title: (items) => `measured ${items[0].raw.x}` + (items[0].raw.row ? ` · rank ${items[0].raw.row.rank || "–"}` : ""),
          label: (item) => `${item.dataset.label}: ${item.raw.y.toPrecision(4)} ms`,
        } },
      },
      onClick: (_e, els) => {
        const p = els.length && els[0].datasetIndex === 1 ? shown[els[0].index] : null;
        if (p && onPick) onPick(p.row);
      },
    },
  });
  canvas.dataset.points = String(history.length);
  canvas.dataset.bestSoFar = steps.map((s) => s.y).join(",");
  return chart;
}

/// Parallel coordinates: an axis per variable (its values spread along it in order) and a last
/// one for the time (fast at the bottom); a line per schedule, coloured from fast (dark) to slow
/// (light), the fastest drawn last. At most MAX_LINES lines (the fastest always).
const MAX_LINES = 2000;
export function parallelPlot(canvas, { variables, rows, times, log }) {
  const t = themeColors();
  const ratio = window.devicePixelRatio || 1;
  const width = canvas.clientWidth || 800, height = canvas.clientHeight || 320;
  canvas.width = Math.round(width * ratio);
  canvas.height = Math.round(height * ratio);
  const ctx = canvas.getContext("2d");
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  ctx.clearRect(0, 0, width, height);
  const lines = [];
  rows.forEach((r, i) => { if (times[i] > 0) lines.push({ r, t: times[i] }); });
  lines.sort((a, b) => b.t - a.t); // slow first: the fast ones are drawn over them
  const kept = lines.length > MAX_LINES
    ? lines.filter((_, n) => n >= lines.length - 200 || n % Math.ceil(lines.length / (MAX_LINES - 200)) === 0)
    : lines;
  const axes = variables.length + 1;
  const left = 40, right = 70, top = 34, bottom = 20;
  const xAt = (a) => left + (axes === 1 ? 0 : (a * (width - left - right)) / (axes - 1));
  const orders = variables.map((v) => valueOrder(v));
  const positions = orders.map((o) => new Map(o.map((vk, p) => [vk, p])));
  const yAtValue = (a, vk) => {
    const n = orders[a].length + 1; // the last place: not used
    const p = vk === null || vk === undefined ? n - 1 : positions[a].get(vk);
    return top + (n === 1 ? 0.5 : p / (n - 1)) * (height - top - bottom);
  };
  const tv = kept.map((l) => (log ? Math.log(l.t) : l.t));
  const lo = Math.min(...tv), hi = Math.max(...tv);
  const yAtTime = (v) => top + (hi > lo ? 1 - (v - lo) / (hi - lo) : 0.5) * (height - top - bottom);
  ctx.lineWidth = 1;
  kept.forEach((l, n) => {
    const f = hi > lo ? ((log ? Math.log(l.t) : l.t) - lo) / (hi - lo) : 0;
    ctx.strokeStyle = `hsla(${215 - 180 * f}, 70%, ${35 + 30 * f}%, ${0.25 + 0.6 * (1 - f)})`;
    ctx.beginPath();
    variables.forEach((_, a) => {
      const y = yAtValue(a, l.r.vars[a]);
      if (a === 0) ctx.moveTo(xAt(a), y); else ctx.lineTo(xAt(a), y);
    });
    ctx.lineTo(xAt(axes - 1), yAtTime(tv[n]));
    ctx.stroke();
  });
  // Axes, with their values.
  ctx.font = "12px system-ui, sans-serif";
  ctx.textAlign = "center";
  for (let a = 0; a < axes; a++) {
    const x = xAt(a);
    ctx.strokeStyle = t.fg;
    ctx.beginPath();
    ctx.moveTo(x, top);
    ctx.lineTo(x, height - bottom);
    ctx.stroke();
    ctx.fillStyle = t.fg;
    ctx.fillText(a < variables.length ? variables[a].name : "time (ms)", x, top - 18);
    ctx.textAlign = "left";
    if (a < variables.length) {
      orders[a].forEach((vk) => {
        ctx.fillStyle = t.bg; const label = variables[a].values[vk]; const w = ctx.measureText(label).width;
        const y = yAtValue(a, vk);
        ctx.fillRect(x + 3, y - 7, w + 4, 14);
        ctx.fillStyle = t.fg; ctx.fillText(label, x + 5, y + 4);
      });
    } else if (kept.length) {
      const label = (v) => (log ? Math.exp(v) : v).toPrecision(3);
      ctx.fillText(label(hi), x + 5, top + 4);
      ctx.fillText(label(lo), x + 5, height - bottom);
    }
    ctx.textAlign = "center";
  }
  canvas.dataset.lines = String(kept.length);
  canvas.dataset.axes = String(axes);
}
