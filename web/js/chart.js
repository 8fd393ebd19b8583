// The thesis' chart (figures 4.2-4.15): every measured schedule a bar, sorted by run time, its
// 20th-80th percentile as an error mark, every baseline a labelled horizontal line. Drawn with
// Chart.js (Debian's libjs-chart.js, loaded by index.html as the global `Chart`).

const BASELINE_COLORS = ["#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2"];

export function baselineColor(i) {
  return BASELINE_COLORS[i % BASELINE_COLORS.length];
}

// Error marks: a vertical line from q20 to q80 over each bar, with caps.
const quantilePlugin = {
  id: "dtxQuantiles",
  afterDatasetsDraw(chart) {
    const marks = chart.options.plugins.dtxQuantiles?.marks || [];
    const meta = chart.getDatasetMeta(0);
    const y = chart.scales.y;
    const { ctx } = chart;
    ctx.save();
    ctx.strokeStyle = themeColors().fg;
    ctx.lineWidth = 1;
    let drawn = 0;
    meta.data.forEach((bar, i) => {
      const q = marks[i];
      if (!q || q.lo === null || q.hi === null || q.lo === undefined || q.hi === undefined) return;
      const top = y.getPixelForValue(q.hi), bottom = y.getPixelForValue(q.lo);
      const half = Math.min(4, Math.max(1, bar.width / 3));
      ctx.beginPath();
      ctx.moveTo(bar.x, bottom);
      ctx.lineTo(bar.x, top);
      ctx.moveTo(bar.x - half, top);
      ctx.lineTo(bar.x + half, top);
      ctx.moveTo(bar.x - half, bottom);
      ctx.lineTo(bar.x + half, bottom);
      ctx.stroke();
      drawn++;
    });
    ctx.restore();
    chart.canvas.dataset.errorMarks = String(drawn);
  },
};

// Baselines: a dashed horizontal line across the plot at each baseline's time, labelled.
const baselinePlugin = {
  id: "dtxBaselines",
  afterDraw(chart) {
    const lines = chart.options.plugins.dtxBaselines?.lines || [];
    const { ctx, chartArea: area } = chart;
    const y = chart.scales.y;
    ctx.save();
    const drawn = [];
    const labelTops = []; // labels close in height are moved up so that none hides another
    for (const line of [...lines].sort((a, b) => a.ms - b.ms)) {
      const py = y.getPixelForValue(line.ms);
      if (!(py >= area.top - 0.5 && py <= area.bottom + 0.5)) continue;
      ctx.strokeStyle = line.color;
      ctx.lineWidth = 2;
      ctx.setLineDash([6, 4]);
      ctx.beginPath();
      ctx.moveTo(area.left, py);
      ctx.lineTo(area.right, py);
      ctx.stroke();
      ctx.setLineDash([]);
      ctx.font = "12px system-ui, sans-serif";
      const label = line.label;
      const w = ctx.measureText(label).width;
      let top = py - 16;
      while (labelTops.some((t) => Math.abs(t - top) < 15)) top -= 15;
      labelTops.push(top);
      ctx.fillStyle = themeColors().bg;
      ctx.fillRect(area.right - w - 8, top, w + 6, 14);
      ctx.fillStyle = line.color;
      ctx.textAlign = "right";
      ctx.fillText(label, area.right - 5, top + 11);
      drawn.push(line.name);
    }
    ctx.restore();
    chart.canvas.dataset.baselines = drawn.join(",");
  },
};

/// The page's colours (they follow prefers-color-scheme through app.css's variables).
export function themeColors() {
  const css = getComputedStyle(document.documentElement);
  const v = (name, fallback) => css.getPropertyValue(name).trim() || fallback;
  return { fg: v("--fg", "#1b1f24"), muted: v("--muted", "#5c6570"), line: v("--line", "#d8dee4"),
    bg: v("--bg", "#ffffff"), bar: v("--bar", "#7fa7e0"), best: v("--bar-best", "#1f5fbf") };
}

export function applyTheme() {
  if (typeof Chart === "undefined") return;
  const t = themeColors();
  Chart.defaults.color = t.fg;
  Chart.defaults.borderColor = t.line;
}

// Zoom: a drag across the plot selects the bars between its ends (drawn as a shaded band).
const selectPlugin = {
  id: "dtxSelect",
  afterDraw(chart) {
    const d = chart.$dtxDrag;
    if (!d || d.to === null) return;
    const { ctx, chartArea: area } = chart;
    ctx.save();
    ctx.fillStyle = "rgba(80, 140, 230, 0.18)";
    ctx.fillRect(Math.min(d.from, d.to), area.top, Math.abs(d.to - d.from), area.bottom - area.top);
    ctx.restore();
  },
};

function attachZoom(canvas) {
  if (canvas.dtxZoom) return;
  canvas.dtxZoom = true;
  const chartOf = () => (typeof Chart === "undefined" ? null : Chart.getChart(canvas));
  const xOf = (e) => e.clientX - canvas.getBoundingClientRect().left;
  canvas.addEventListener("mousedown", (e) => {
    const chart = chartOf();
    if (!chart || e.button !== 0) return;
    chart.$dtxDrag = { from: xOf(e), to: null };
  });
  canvas.addEventListener("mousemove", (e) => {
    const chart = chartOf();
    if (!chart || !chart.$dtxDrag) return;
    chart.$dtxDrag.to = xOf(e);
    chart.draw();
  });
  const end = (e) => {
    const chart = chartOf();
    if (!chart || !chart.$dtxDrag) return;
    const d = chart.$dtxDrag;
    chart.$dtxDrag = null;
    const to = e.type === "mouseup" ? xOf(e) : d.to;
    if (to === null || Math.abs(to - d.from) < 6) { chart.draw(); return; }
    const x = chart.scales.x;
    const n = chart.data.labels.length;
    const clamp = (v) => Math.max(0, Math.min(n - 1, Math.round(v)));
    const a = clamp(x.getValueForPixel(Math.min(d.from, to))), b = clamp(x.getValueForPixel(Math.max(d.from, to)));
    chart.draw();
    canvas.dtxDraggedAt = Date.now(); // the click that ends a drag opens nothing
    const zoom = chart.options.plugins.dtxSelect?.onSelect;
    if (zoom && b >= a) zoom(a, b);
  };
  canvas.addEventListener("mouseup", end);
  canvas.addEventListener("mouseleave", end);
}

/// Draws (or redraws) the chart on `canvas`.
///   bars: [{label, ms, lo, hi, id, at, rank, protocol, color}] sorted by ms (`at`: the bar's
///   position among all the schedules drawn, which a sample keeps); baselines: [{name, ms,
///   color}]; log: a logarithmic time axis; unit: the metric's label; onPick(bar) on a click;
///   onSelect(first, last) when bars are selected by a drag (zoom).
/// Returns the Chart, or throws when Chart.js is not there.
export function drawChart(canvas, { bars, baselines, log, unit, onPick, onSelect, existing, title }) {
  if (typeof Chart === "undefined")
    throw new Error("Chart.js is not installed on the server (Debian's libjs-chart.js)");
  applyTheme();
  const theme = themeColors();
  if (existing) existing.destroy();
  attachZoom(canvas);
  const best = bars.length ? Math.min(...bars.map((b) => b.ms)) : null;
  const values = bars.flatMap((b) => [b.ms, b.hi ?? b.ms]).concat(baselines.map((b) => b.ms));
  const lows = bars.map((b) => b.lo ?? b.ms).concat(baselines.map((b) => b.ms));
  const max = values.length ? Math.max(...values) : 1;
  const min = lows.length ? Math.min(...lows) : 0;
  const y = log
    ? { type: "logarithmic", min: min > 0 ? min / 1.5 : undefined, max: max * 1.5 }
    : { type: "linear", beginAtZero: true, suggestedMax: max, grace: "4%" };
  const chart = new Chart(canvas, {
    type: "bar",
    data: {
      labels: bars.map((b, i) => String((b.at ?? i) + 1)),
      datasets: [{
        label: `schedules (${unit})`,
        data: bars.map((b) => b.ms),
        backgroundColor: bars.map((b) => b.color || (b.ms === best ? theme.best : theme.bar)),
        borderWidth: 0,
        barPercentage: 0.9,
        categoryPercentage: 1.0,
        minBarLength: 1,
      }],
    },
    options: {
      animation: false,
      responsive: true,
      maintainAspectRatio: false,
      scales: {
        x: {
          title: { display: true, text: title || "schedules, sorted by run time" },
          ticks: { autoSkip: true, maxTicksLimit: 20, maxRotation: 0 },
          grid: { display: false },
        },
        y: { ...y, title: { display: true, text: `run time (ms, ${unit}) — lower is better` } },
      },
      plugins: {
        legend: { display: false },
        tooltip: {
          callbacks: {
            title: (items) => {
              const b = bars[items[0].dataIndex];
              return `#${(b.at ?? items[0].dataIndex) + 1}` + (b.rank ? ` · rank ${b.rank}` : " · not ranked") +
                (b.protocol ? ` · ${b.protocol === "full" ? "full protocol" : "screening"}` : "");
            },
            label: (item) => {
              const b = bars[item.dataIndex];
              const q = b.lo !== null && b.lo !== undefined ? ` (q20 ${b.lo.toPrecision(4)}, q80 ${b.hi.toPrecision(4)})` : "";
              return `${b.ms.toPrecision(4)} ms${q}` + (b.value !== undefined ? ` · ${b.value}` : "");
            },
            afterLabel: (item) => bars[item.dataIndex].label.split(";").join(";\n"),
          },
        },
        dtxQuantiles: { marks: bars },
        dtxBaselines: {
          lines: baselines.map((b) => ({ ...b, label: `${b.name} ${b.ms.toPrecision(4)} ms` })),
        },
        dtxSelect: { onSelect },
      },
      onClick: (_evt, elements) => {
        if (Date.now() - (canvas.dtxDraggedAt || 0) < 400) return;
        if (elements.length && onPick) onPick(bars[elements[0].index]);
      },
      onHover: (evt, elements) => {
        evt.native.target.style.cursor = elements.length ? "pointer" : "crosshair";
      },
    },
    plugins: [quantilePlugin, baselinePlugin, selectPlugin],
  });
  canvas.dataset.bars = String(bars.length);
  return chart;
}
