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
    ctx.strokeStyle = "#222";
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
      ctx.fillStyle = "rgba(255,255,255,0.85)";
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

/// Draws (or redraws) the chart on `canvas`.
///   bars: [{label, ms, lo, hi, id}] sorted by ms; baselines: [{name, ms, color}];
///   log: a logarithmic time axis; unit: the metric's label; onPick(bar) on a click.
/// Returns the Chart, or throws when Chart.js is not there.
export function drawChart(canvas, { bars, baselines, log, unit, onPick, existing }) {
  if (typeof Chart === "undefined")
    throw new Error("Chart.js is not installed on the server (Debian's libjs-chart.js)");
  if (existing) existing.destroy();
  const best = bars.length ? bars[0].ms : null;
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
      labels: bars.map((_, i) => String(i + 1)),
      datasets: [{
        label: `schedules (${unit})`,
        data: bars.map((b) => b.ms),
        backgroundColor: bars.map((b) => (b.ms === best ? "#1f5fbf" : "#7fa7e0")),
        borderWidth: 0,
        barPercentage: 0.9,
        categoryPercentage: 1.0,
      }],
    },
    options: {
      animation: false,
      responsive: true,
      maintainAspectRatio: false,
      scales: {
        x: {
          title: { display: true, text: "schedules, sorted by run time" },
          ticks: { autoSkip: true, maxTicksLimit: 20, maxRotation: 0 },
          grid: { display: false },
        },
        y: { ...y, title: { display: true, text: `run time (ms, ${unit}) — lower is better` } },
      },
      plugins: {
        legend: { display: false },
        tooltip: {
          callbacks: {
            title: (items) => `#${items[0].dataIndex + 1}`,
            label: (item) => {
              const b = bars[item.dataIndex];
              const q = b.lo !== null && b.lo !== undefined ? ` (q20 ${b.lo.toPrecision(4)}, q80 ${b.hi.toPrecision(4)})` : "";
              return `${b.ms.toPrecision(4)} ms${q}`;
            },
            afterLabel: (item) => bars[item.dataIndex].label.split(";").join(";\n"),
          },
        },
        dtxQuantiles: { marks: bars },
        dtxBaselines: {
          lines: baselines.map((b) => ({ ...b, label: `${b.name} ${b.ms.toPrecision(4)} ms` })),
        },
      },
      onClick: (_evt, elements) => {
        if (elements.length && onPick) onPick(bars[elements[0].index]);
      },
      onHover: (evt, elements) => {
        evt.native.target.style.cursor = elements.length ? "pointer" : "default";
      },
    },
    plugins: [quantilePlugin, baselinePlugin],
  });
  canvas.dataset.bars = String(bars.length);
  return chart;
}
