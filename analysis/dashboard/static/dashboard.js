// The dashboard's pages, filled from their JSON endpoint and polled every data-poll-ms.
// No inline script anywhere (the Content-Security-Policy forbids it): the page says what it is
// through data- attributes on <main id="page">. Chart renderers are chosen by the chart spec's
// "type" (analysis/dashboard/views.py makes the specs); a new kind of chart is one more entry
// in CHARTS. A view's further sections (charts, tables, heatmaps) go under #estimate-sections.
"use strict";

(function () {
  const page = document.getElementById("page");
  if (!page) return;
  const api = page.dataset.api;
  const pollMs = Number(page.dataset.pollMs) || 2000;

  const LABELS = {
    epsilon_per_report: "epsilon per report",
    delta_per_report: "delta per report",
    memoized: "memoized (permanent responses)",
    epsilon_inf: "epsilon_inf (unlimited reports of one value)",
    policy: "device policy",
    neighbouring: "neighbouring datasets",
    delta: "delta of the Gaussian baseline",
    ldp_std_error: "LDP standard error (per item)",
    central_laplace_std_error: "central Laplace standard error",
    central_gaussian_std_error: "central Gaussian standard error",
    variance_ratio: "variance ratio LDP / central Laplace",
    ldp_users_for_central_laplace_error: "users LDP needs for the central error at this n",
    central_laplace_users_for_ldp_error: "users the central model needs for this error",
    shuffled_local_epsilon: "shuffled: local epsilon for the same central epsilon (one batch of n)",
    shuffled_std_error: "shuffled standard error (per item)",
    shuffled_share_of_gap_closed: "shuffled: share of the log gap to the curator closed",
    secure_aggregation_std_error: "secure aggregation (DAP, two aggregators) standard error",
    secure_aggregation_share_of_gap_closed: "secure aggregation: share of the log gap closed",
    secure_aggregation_gaussian_rho:
      "secure aggregation, discrete Gaussian: rho (zCDP) for the same epsilon at delta",
    secure_aggregation_gaussian_std_error:
      "secure aggregation, discrete Gaussian standard error (same epsilon, delta)",
    secure_aggregation_gaussian_share_of_gap_closed:
      "secure aggregation, discrete Gaussian: share of the log gap closed",
    reason: "not available",
  };

  function format(value) {
    if (value === null || value === undefined) return "–";
    if (typeof value === "boolean") return value ? "yes" : "no";
    if (typeof value === "number") {
      if (Number.isInteger(value)) return value.toLocaleString("en");
      const size = Math.abs(value);
      if (size !== 0 && (size < 1e-3 || size >= 1e6)) return value.toExponential(3);
      if (size >= 100) return value.toLocaleString("en", { maximumFractionDigits: 1 });
      return value.toFixed(4);
    }
    if (typeof value === "object") return JSON.stringify(value);
    return String(value);
  }

  // A number in its column's format (analysis/views/dashboard.py column_format chooses one
  // per column from the column's range, so a column never mixes styles).
  function formatWith(spec, value) {
    if (!spec || typeof value !== "number" || !Number.isFinite(value)) return format(value);
    const digits = spec.decimals || 0;
    switch (spec.style) {
      case "percent":
        return `${(100 * value).toFixed(digits)}%`;
      case "integer":
        return value.toLocaleString("en");
      case "scientific":
        return value.toExponential(digits);
      case "fixed":
        return value.toLocaleString("en", { minimumFractionDigits: digits, maximumFractionDigits: digits });
      default:
        return format(value);
    }
  }

  function cell(tag, value, numeric, spec) {
    const element = document.createElement(tag);
    element.textContent = formatWith(spec, value);
    if (numeric) element.className = "num";
    if (typeof value === "number") element.dataset.value = String(value);
    return element;
  }

  function setText(id, value) {
    const element = document.getElementById(id);
    if (element) element.textContent = format(value);
  }

  function fillTable(table, columns, rows, formats) {
    const head = table.tHead;
    const body = table.tBodies[0];
    if (head) {
      const row = document.createElement("tr");
      columns.forEach((column, i) => {
        const th = document.createElement("th");
        th.textContent = column;
        if (i > 0) th.className = "num";
        row.appendChild(th);
      });
      head.replaceChildren(row);
    }
    body.replaceChildren(
      ...rows.map((values) => {
        const tr = document.createElement("tr");
        values.forEach((value, i) => tr.appendChild(cell("td", value, i > 0, formats && formats[i])));
        return tr;
      }),
    );
  }

  // A fact's cell: an object (the device policy) as one "field: value" line per field, not JSON.
  function readable(value) {
    if (value === null || typeof value !== "object" || Array.isArray(value)) return cell("td", value, false);
    const td = document.createElement("td");
    const list = document.createElement("ul");
    list.className = "fields";
    Object.entries(value).forEach(([key, inner]) => {
      const item = document.createElement("li");
      const name = document.createElement("span");
      name.className = "field";
      name.textContent = `${(LABELS[key] || key).replaceAll("_", " ")}: `;
      item.appendChild(name);
      item.appendChild(document.createTextNode(typeof inner === "object" && inner !== null ? Object.entries(inner).map(([k, v]) => `${k.replaceAll("_", " ")} ${format(v)}`).join(", ") || "none" : format(inner)));
      list.appendChild(item);
    });
    if (!list.children.length) list.textContent = "none";
    td.appendChild(list);
    return td;
  }

  function fillFacts(table, facts) {
    const rows = Object.entries(facts).filter(([key]) => key !== "available");
    table.tBodies[0].replaceChildren(
      ...rows.map(([key, value]) => {
        const tr = document.createElement("tr");
        tr.dataset.key = key;
        const th = document.createElement("th");
        th.textContent = LABELS[key] || key;
        tr.appendChild(th);
        tr.appendChild(readable(value));
        return tr;
      }),
    );
  }

  // Whiskers for interval charts: dataset option `intervals: {low: [...], high: [...]}`.
  const whiskers = {
    id: "ldpWhiskers",
    afterDatasetsDraw(chart) {
      const { ctx, scales } = chart;
      chart.data.datasets.forEach((dataset, index) => {
        const intervals = dataset.intervals;
        if (!intervals) return;
        const meta = chart.getDatasetMeta(index);
        ctx.save();
        ctx.strokeStyle = "#1f2937";
        ctx.lineWidth = 1.5;
        meta.data.forEach((element, i) => {
          const low = intervals.low[i];
          const high = intervals.high[i];
          if (low === null || high === null) return;
          const x = element.x;
          const top = scales.y.getPixelForValue(high);
          const bottom = scales.y.getPixelForValue(low);
          const cap = Math.max(3, Math.min(8, (element.width || 12) / 4));
          ctx.beginPath();
          ctx.moveTo(x, top);
          ctx.lineTo(x, bottom);
          ctx.moveTo(x - cap, top);
          ctx.lineTo(x + cap, top);
          ctx.moveTo(x - cap, bottom);
          ctx.lineTo(x + cap, bottom);
          ctx.stroke();
        });
        ctx.restore();
      });
    },
  };

  // A small line of reports per day (the overview): an inline SVG drawn through the DOM.
  function sparkline(days, reports) {
    const ns = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(ns, "svg");
    const width = 56;
    const height = 16;
    svg.setAttribute("class", "sparkline");
    svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
    svg.setAttribute("width", String(width));
    svg.setAttribute("height", String(height));
    svg.setAttribute("role", "img");
    const title = document.createElementNS(ns, "title");
    title.textContent = days.map((d, i) => `${d}: ${format(reports[i])}`).join("\n");
    svg.appendChild(title);
    svg.setAttribute("aria-label", `reports per day over ${days.length} days`);
    const top = Math.max(1, ...reports);
    const step = reports.length > 1 ? (width - 2) / (reports.length - 1) : 0;
    const xy = reports.map((r, i) => `${(1 + i * step).toFixed(1)},${(height - 1 - (height - 2) * (r / top)).toFixed(1)}`);
    const line = document.createElementNS(ns, "polyline");
    line.setAttribute("points", xy.length === 1 ? `1,${xy[0].split(",")[1]} ${width - 1},${xy[0].split(",")[1]}` : xy.join(" "));
    svg.appendChild(line);
    return svg;
  }

  function extent(spec) {
    const values = [...spec.low, ...spec.high, ...spec.values, 0].filter((v) => v !== null && v !== undefined);
    return { min: Math.min(...values), max: Math.max(...values) };
  }

  function points(xs, ys) {
    return xs.map((x, i) => ({ x, y: ys[i] }));
  }

  const PALETTE = ["rgb(37, 99, 235)", "rgb(217, 119, 6)", "rgb(5, 150, 105)", "rgb(190, 24, 93)", "rgb(109, 40, 217)"];

  // Axis titles (x_title, y_title: the campaign's unit already in them) and percent ticks
  // (percent: the values are shares) from the spec, on whatever chart the type built.
  function axes(config, spec) {
    const scales = (config.options.scales = config.options.scales || {});
    ["x", "y"].forEach((axis) => {
      const title = spec[`${axis}_title`];
      if (title) scales[axis] = Object.assign(scales[axis] || {}, { title: { display: true, text: title } });
    });
    if (spec.percent) {
      scales.y = Object.assign(scales.y || {}, {
        ticks: { callback: (value) => `${(100 * value).toLocaleString("en", { maximumFractionDigits: 2 })}%` },
      });
    }
  }

  const CHARTS = {
    "interval-bars": (spec) => ({
      type: "bar",
      data: {
        labels: spec.labels,
        datasets: [
          {
            label: spec.label,
            data: spec.values,
            backgroundColor: "rgba(37, 99, 235, 0.55)",
            borderColor: "rgb(37, 99, 235)",
            borderWidth: 1,
            intervals: { low: spec.low, high: spec.high },
          },
        ],
      },
      options: { scales: { y: { suggestedMin: extent(spec).min, suggestedMax: extent(spec).max } } },
    }),
    "interval-points": (spec) => ({
      type: "line",
      data: {
        labels: spec.labels,
        datasets: [
          {
            label: spec.label,
            data: spec.values,
            showLine: false,
            pointRadius: 6,
            pointBackgroundColor: "rgb(37, 99, 235)",
            intervals: { low: spec.low, high: spec.high },
          },
        ],
      },
      options: {
        scales: {
          x: { offset: true },
          y: {
            suggestedMin: spec.range && spec.range[0] !== null ? spec.range[0] : extent(spec).min,
            suggestedMax: spec.range && spec.range[1] !== null ? spec.range[1] : extent(spec).max,
          },
        },
      },
    }),
    // A curve with its band (a CDF with bootstrap intervals): the band is filled between the
    // low and high curves.
    "band-line": (spec) => ({
      type: "line",
      data: {
        datasets: [
          {
            label: spec.band_label,
            data: points(spec.x, spec.low),
            borderColor: "rgba(37, 99, 235, 0.25)",
            borderWidth: 1,
            pointRadius: 0,
            fill: false,
          },
          {
            label: `${spec.band_label} (upper)`,
            data: points(spec.x, spec.high),
            borderColor: "rgba(37, 99, 235, 0.25)",
            backgroundColor: "rgba(37, 99, 235, 0.18)",
            borderWidth: 1,
            pointRadius: 0,
            fill: "-1",
          },
          {
            label: spec.label,
            data: points(spec.x, spec.values),
            borderColor: "rgb(37, 99, 235)",
            borderWidth: 2,
            pointRadius: 0,
            fill: false,
          },
        ],
      },
      options: {
        parsing: true,
        plugins: { legend: { labels: { filter: (item) => !item.text.endsWith("(upper)") } } },
        scales: {
          x: { type: "linear", min: spec.x[0], max: spec.x[spec.x.length - 1] },
          y: spec.range ? { min: spec.range[0], max: spec.range[1] } : { suggestedMin: 0, suggestedMax: 1 },
        },
      },
    }),
    // Per-day estimates (the "--by day" series): one line per item or coordinate, each day's
    // interval as whiskers; a day below min_batch_size is a gap.
    trend: (spec) => ({
      type: "line",
      data: {
        labels: spec.labels,
        datasets: spec.series.map((line, i) => ({
          label: line.label,
          data: line.values,
          borderColor: PALETTE[i % PALETTE.length],
          backgroundColor: PALETTE[i % PALETTE.length],
          pointRadius: 4,
          spanGaps: false,
          intervals: { low: line.low, high: line.high },
        })),
      },
      options: {
        scales: {
          x: { offset: true },
          // The axis spans every interval, so no whisker runs off the chart.
          y: (() => {
            const all = spec.series.flatMap((line) => [...line.low, ...line.high, ...line.values]).filter((v) => v !== null && v !== undefined);
            return all.length ? { suggestedMin: Math.min(...all), suggestedMax: Math.max(...all) } : {};
          })(),
        },
      },
    }),
    "day-bars": (spec) => ({
      type: "bar",
      data: {
        labels: spec.labels,
        datasets: [
          { label: spec.label, data: spec.values, maxBarThickness: 48, backgroundColor: "rgba(100, 116, 139, 0.7)" },
        ],
      },
      options: { scales: { y: { beginAtZero: true } } },
    }),
  };

  const HINTS = {
    "interval-bars":
      "Bars: estimated frequencies; whiskers: confidence intervals. Unbiased estimates may fall below 0.",
    "interval-points": "Points: estimates; whiskers: confidence intervals; the axis spans the mechanism's range.",
    "band-line": "Line: the estimated CDF; shaded: its pointwise bootstrap interval.",
  };

  const charts = {};

  function drawChart(id, spec) {
    const canvas = document.getElementById(id);
    if (canvas && canvas.parentElement) canvas.parentElement.hidden = !spec;
    if (!spec) return;
    const build = CHARTS[spec.type];
    if (!canvas || !build || typeof Chart === "undefined") return;
    const config = build(spec);
    config.options = config.options || {};
    axes(config, spec);
    // The axis titles are drawn on the canvas; they are said on the element too (screen readers).
    ["x", "y"].forEach((axis) => {
      const title = spec[`${axis}_title`];
      if (title) canvas.dataset[`${axis}Title`] = title;
      else delete canvas.dataset[`${axis}Title`];
    });
    config.options = Object.assign(
      { animation: false, responsive: true, maintainAspectRatio: false, plugins: { legend: { display: true } } },
      config.options,
    );
    config.plugins = [whiskers];
    const existing = charts[id];
    if (existing && existing.config.type === config.type) {
      existing.data.labels = config.data.labels;
      config.data.datasets.forEach((dataset, i) => Object.assign(existing.data.datasets[i], dataset));
      existing.data.datasets.length = config.data.datasets.length;
      existing.options.scales = config.options.scales;
      existing.update("none");
      return;
    }
    if (existing) existing.destroy();
    charts[id] = new Chart(canvas, config);
  }

  // A heatmap of a table of estimates (a two-way marginal): one cell per pair of values, its
  // shade the estimate (clipped to [0, max]), its text the estimate and standard error.
  function fillHeatmap(table, heatmap) {
    const max = Math.max(1e-12, ...heatmap.values.flat().filter((v) => v !== null));
    const corner = document.createElement("th");
    corner.textContent = `${heatmap.row_name} \\ ${heatmap.column_name}`;
    const head = document.createElement("tr");
    head.appendChild(corner);
    heatmap.columns.forEach((column) => {
      const th = document.createElement("th");
      th.textContent = column;
      th.className = "num";
      head.appendChild(th);
    });
    table.tHead.replaceChildren(head);
    table.tBodies[0].replaceChildren(
      ...heatmap.rows.map((rowName, r) => {
        const tr = document.createElement("tr");
        const th = document.createElement("th");
        th.textContent = rowName;
        tr.appendChild(th);
        heatmap.values[r].forEach((value, c) => {
          const td = cell("td", value, true);
          const error = heatmap.std_errors[r][c];
          if (error !== null && error !== undefined) td.title = `standard error ${format(error)}; interval [${format(heatmap.ci_low[r][c])}, ${format(heatmap.ci_high[r][c])}]`;
          const shade = value === null ? 0 : Math.max(0, Math.min(1, value / max));
          td.style.backgroundColor = `rgba(37, 99, 235, ${(0.08 + 0.72 * shade).toFixed(3)})`;
          if (shade > 0.6) td.style.color = "#fff";
          tr.appendChild(td);
        });
        return tr;
      }),
    );
  }

  // A table in a box that scrolls sideways when the table is wider than the page.
  function scrolling(table) {
    const box = document.createElement("div");
    box.className = "scroll";
    box.appendChild(table);
    return box;
  }

  function newTable(className) {
    const table = document.createElement("table");
    table.className = className;
    table.appendChild(document.createElement("thead"));
    table.appendChild(document.createElement("tbody"));
    return table;
  }

  // The view's further sections ({title, hint, chart, table, heatmap}); the DOM is rebuilt only
  // when their shape changes, so charts update in place between polls.
  function showSections(container, sections) {
    const shape = JSON.stringify(sections.map((s) => [s.title, Boolean(s.collapsed), Boolean(s.chart), Boolean(s.table), Boolean(s.heatmap)]));
    if (container.dataset.shape !== shape) {
      Object.keys(charts)
        .filter((id) => id.startsWith("section-chart-"))
        .forEach((id) => {
          charts[id].destroy();
          delete charts[id];
        });
      container.replaceChildren(
        ...sections.map((section, i) => {
          const part = document.createElement(section.collapsed ? "details" : "section");
          part.className = "estimate-section";
          part.dataset.index = String(i);
          const title = document.createElement(section.collapsed ? "summary" : "h3");
          title.textContent = section.title;
          part.appendChild(title);
          if (section.hint) {
            const hint = document.createElement("p");
            hint.className = "hint";
            hint.textContent = section.hint;
            part.appendChild(hint);
          }
          if (section.chart) {
            const box = document.createElement("div");
            box.className = "chart";
            const canvas = document.createElement("canvas");
            canvas.id = `section-chart-${i}`;
            canvas.setAttribute("role", "img");
            canvas.setAttribute("aria-label", section.title);
            box.appendChild(canvas);
            part.appendChild(box);
          }
          if (section.table) part.appendChild(scrolling(newTable("data section-table")));
          if (section.heatmap) part.appendChild(scrolling(newTable("data heatmap")));
          return part;
        }),
      );
      container.dataset.shape = shape;
    }
    sections.forEach((section, i) => {
      const part = container.children[i];
      if (section.chart) drawChart(`section-chart-${i}`, section.chart);
      if (section.table) fillTable(part.querySelector("table.section-table"), section.table.columns, section.table.rows, section.table.formats);
      if (section.heatmap) fillHeatmap(part.querySelector("table.heatmap"), section.heatmap);
    });
  }

  function showCampaigns(document_) {
    const table = document.getElementById("campaigns");
    table.tBodies[0].replaceChildren(
      ...document_.campaigns.map((c) => {
        const tr = document.createElement("tr");
        tr.dataset.campaign = c.name;
        const name = document.createElement("td");
        if (c.url) {
          const link = document.createElement("a");
          link.href = c.url;
          link.textContent = c.name;
          name.appendChild(link);
        } else {
          name.textContent = c.name; // a secure-aggregation campaign: no page, no estimate
        }
        tr.appendChild(name);
        // What a team looks for first (n, reports per day, status) leads, so that a narrow
        // screen shows it before the table scrolls.
        tr.appendChild(cell("td", c.n, true));
        const perDay = cell("td", c.reports_per_day, true);
        perDay.classList.add("per-day");
        if (c.days) perDay.prepend(sparkline(c.days.days, c.days.reports), " ");
        tr.appendChild(perDay);
        const status = cell("td", c.status, false);
        status.className = `state ${c.status}`;
        tr.appendChild(status);
        const estimate = c.note
          ? cell("td", c.note, false)
          : cell("td", c.estimate_status === "released" ? "released" : `withheld (${format(c.n)} of ${format(c.min_batch_size)})`, false);
        estimate.className = c.note ? "note" : `state ${c.estimate_status}`;
        tr.appendChild(estimate);
        const latest = cell("td", c.reports_latest_day, true);
        if (c.latest_day) latest.textContent = `${format(c.reports_latest_day)} on ${c.latest_day}`;
        tr.appendChild(latest);
        tr.appendChild(cell("td", c.mechanism, false));
        tr.appendChild(cell("td", c.epsilon, true));
        return tr;
      }),
    );
  }

  function showCampaign(d) {
    setText("n", d.n);
    setText("mechanism", `${d.mechanism} (epsilon ${format(d.epsilon)})`);
    setText("min-batch", d.min_batch_size);
    setText("campaign-status", d.status);
    setText("estimate-status", d.estimate_status);
    setText("unit", d.unit || "–");
    setText("description", d.description || "");
    fillFacts(document.getElementById("privacy-table"), d.privacy);
    const released = d.estimate_status === "released" && d.display;
    document.getElementById("withheld").hidden = Boolean(released);
    document.getElementById("released").hidden = !released;
    if (!released) return;
    const view = d.display;
    page.dataset.view = view.view;
    setText("estimate-title", `${view.title} (${Math.round(100 * d.estimate.confidence)}% intervals)`);
    const behind = d.estimate.n !== undefined && d.estimate.n !== d.n;
    document.getElementById("estimate-behind").hidden = !behind;
    if (behind) setText("estimate-behind", `Estimate of the first ${format(d.estimate.n)} reports; the newer ones are being estimated.`);
    document.getElementById("estimate-hint").textContent = view.chart ? HINTS[view.chart.type] || "" : "";
    drawChart("estimate-chart", view.chart);
    fillTable(document.getElementById("estimate-table"), view.table.columns, view.table.rows, view.table.formats);
    showSections(document.getElementById("estimate-sections"), view.sections || []);
    document.getElementById("estimate-notes").replaceChildren(
      ...(view.notes || []).map((note) => {
        const li = document.createElement("li");
        li.textContent = note;
        return li;
      }),
    );
    drawChart("trend-chart", d.trend || null);
    document.getElementById("trend").hidden = !d.trend;
    if (d.trend) page.dataset.trendPoints = String(d.trend.series[0].values.filter((v) => v !== null).length);
    drawChart("series-chart", { type: "day-bars", label: "reports", labels: d.series.days, values: d.series.reports, x_title: "day (UTC)", y_title: "reports" });
    fillFacts(document.getElementById("gap-table"), d.gap);
  }

  async function poll() {
    try {
      const response = await fetch(api, { credentials: "same-origin", headers: { Accept: "application/json" } });
      if (response.status === 401) {
        window.location.assign("/login");
        return;
      }
      const body = await response.json();
      if (!response.ok) {
        setText("updated", `Not available: ${body.detail || response.status}`);
      } else {
        if (page.dataset.page === "campaigns") showCampaigns(body);
        else showCampaign(body);
        setText("updated", `Updated ${new Date().toLocaleTimeString("en-GB")} · every ${pollMs / 1000} s`);
        page.dataset.n = String(body.n === undefined ? "" : body.n);
        page.dataset.updates = String(Number(page.dataset.updates || 0) + 1);
      }
    } catch (error) {
      setText("updated", `Update failed (${error.message}); retrying`);
    }
    window.setTimeout(poll, pollMs);
  }

  poll();
})();
