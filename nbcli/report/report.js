/* nb report: draws the page from the JSON in #nb-data with uPlot (inlined above).
 * Logged strings (tags, text, config) only ever go into textContent, never into HTML. */
(function () {
  "use strict";
  var DATA = null;  // the page's data: inlined (nb report) or fetched (nb serve), set by draw()
  var PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
  var state = { smooth: 0, logy: false };
  var charts = [];  // {def, make, u}: rebuilt when log-y or the width changes
  window.nbCharts = charts;  // for tests and for the console
  window.nbSmooth = ema;  // the smoothing rule (defined below), for tests and for the console

  function el(tag, props) {
    var e = document.createElement(tag);
    if (props) for (var k in props) {
      if (k === "text") e.textContent = props[k];
      else if (k === "cls") e.className = props[k];
      else e.setAttribute(k, props[k]);
    }
    for (var i = 2; i < arguments.length; i++) if (arguments[i] != null) e.appendChild(arguments[i]);
    return e;
  }
  function fmt(v) {
    if (v == null) return "-";
    if (typeof v === "string") return v;
    if (typeof v === "number") {
      if (!isFinite(v)) return String(v);
      var a = Math.abs(v);
      if (a >= 1e6 && a < 1e21 && Number.isInteger(v)) return fmtInt(v);  // a step of 1,000,000, not 1.00000e+6
      if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(5);
      return String(+v.toPrecision(6));
    }
    return JSON.stringify(v);
  }
  function fmtAxis(v) {
    if (v == null) return "";
    var a = Math.abs(v);
    if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(1);
    return String(+v.toPrecision(4));
  }
  function fmtStep(v) {  // axis ticks: 1.2M, 350k
    var a = Math.abs(v);
    if (a >= 1e6) return +(v / 1e6).toPrecision(4) + "M";
    if (a >= 1e4) return +(v / 1e3).toPrecision(4) + "k";
    return fmtInt(v);
  }
  function fmtInt(v) { return v == null ? "-" : Math.round(v).toLocaleString("en-US"); }
  function count(n, word) { return fmtInt(n) + " " + word + (n === 1 ? "" : "s"); }  // "1 point", "2 points"
  function fmtTime(s) { return s == null ? "-" : new Date(s * 1000).toISOString().replace("T", " ").slice(0, 19) + " UTC"; }
  function color(i) { return PALETTE[i % PALETTE.length]; }
  function alpha(hex, a) {
    var n = parseInt(hex.slice(1), 16);
    return "rgba(" + (n >> 16) + "," + ((n >> 8) & 255) + "," + (n & 255) + "," + a + ")";
  }
  function table(head, rows, rowClass, cls) {
    var t = el("table", cls ? { cls: cls } : null), tr = el("tr");
    head.forEach(function (h) { tr.appendChild(el("th", { text: h })); });
    t.appendChild(tr);
    rows.forEach(function (r, i) {
      var row = el("tr", rowClass ? { cls: rowClass(i) || "" } : null);
      r.forEach(function (c) {
        row.appendChild(typeof c === "number" ? el("td", { cls: "num", text: fmt(c) }) : textCell(fmt(c)));
      });
      t.appendChild(row);
    });
    return t;
  }
  /* a cell of text: wrapped where it must (a path or a JSON blob has no spaces), and a value
     longer than LONG_CELL characters folded to its start, the whole of it one click away */
  var LONG_CELL = 160;
  function textCell(text) {
    if (text.length <= LONG_CELL) return el("td", { text: text });
    return el("td", { cls: "long" }, el("details", null,
      el("summary", null, el("span", { cls: "cut", text: text.slice(0, LONG_CELL) + "…" }),
        el("span", { cls: "more", text: " (" + count(text.length, "character") + ": show all)" }),
        el("span", { cls: "less", text: "show less" })),
      el("div", { cls: "full", text: text })));
  }
  /* the smoothing rule of every viewer (nbcli/series/_smooth.py): TensorBoard's debiased
     exponential moving average; a missing (null) or non-finite value does not move the
     average and keeps its own value */
  function ema(a, w) {
    if (!w || !a) return a;
    var out = new Array(a.length), num = 0, den = 0;
    for (var i = 0; i < a.length; i++) {
      var v = a[i];
      if (v == null) { out[i] = null; continue; }  // an empty bucket
      if (!isFinite(v)) { out[i] = v; continue; }
      num = num * w + v; den = den * w + 1; out[i] = num / den;
    }
    return out;
  }
  function positive(a) { return state.logy && a ? a.map(function (v) { return v != null && v > 0 ? v : null; }) : a; }

  var main = document.getElementById("main");
  var toc = document.getElementById("toc");
  function section(id, title) {
    var s = el("section", { id: id }, el("h2", { text: title }));
    main.appendChild(s);
    toc.appendChild(el("a", { href: "#" + id, text: title }));
    return s;
  }

  /* ---- runs: identity, config (one column per run), sessions ---- */
  function runs() {
    var s = section("runs", "Runs");
    var keys = ["project", "name", "status", "last_step", "failure", "hang", "world_size", "launcher", "job_id", "hosts", "created", "version", "ranks"];
    s.appendChild(table(["run"].concat(DATA.runs.map(function (r) { return r.id; })),
      keys.map(function (k) {
        return [k].concat(DATA.runs.map(function (r) {
          var v = r[k];
          if (k === "created") return fmtTime(v);
          if (k === "ranks") return v && v.length ? v.length + " (" + v[0] + "-" + v[v.length - 1] + ")" : "-";
          return Array.isArray(v) ? v.join(", ") : v;
        }));
      }), null, "kv"));
    var conf = {}, order = [];
    DATA.runs.forEach(function (r, i) {
      r.config.forEach(function (kv) {
        if (!(kv[0] in conf)) { conf[kv[0]] = []; order.push(kv[0]); }
        conf[kv[0]][i] = JSON.stringify(kv[1]);
      });
    });
    s.appendChild(el("h3", { text: "Config" + (DATA.runs.length > 1 ? " (rows that differ are marked)" : "") }));
    if (!order.length) s.appendChild(el("p", { cls: "note", text: "no config recorded" }));
    else {
      var rows = order.map(function (k) { return [k].concat(DATA.runs.map(function (_r, i) { return conf[k][i] == null ? "-" : conf[k][i]; })); });
      s.appendChild(table(["key"].concat(DATA.runs.map(function (r) { return r.id; })), rows, function (i) {
        var vals = rows[i].slice(1);
        return vals.some(function (v) { return v !== vals[0]; }) ? "differs" : "";
      }, "kv"));
    }
    DATA.runs.forEach(function (r) {
      var lost = (r.damage || []).filter(function (d) { return d.lost; });
      if (!(r.damage || []).length) return;
      /* damaged bytes of the event logs, skipped: this page lacks what they held (never silent) */
      var box = el("div", { cls: "damage" }, el("h3", { text: "Damaged event logs of " + r.id + ": " +
        (lost.length ? "this page lacks what " + count(lost.length, "damaged range") + " held" : "nothing lost") }));
      box.appendChild(table(["rank", "session", "bytes", "at", "held", "points lost"], r.damage.map(function (d) {
        return [d.rank, d.session, fmtInt(d.bytes), d.start + "-" + d.stop, d.frame || "unknown (frame header)",
                d.lost ? (d.points == null ? "unknown" : fmtInt(d.points)) : "none (copy read)"];
      })));
      s.appendChild(box);
    });
    DATA.runs.forEach(function (r) {
      s.appendChild(el("h3", { text: "Sessions of " + r.id }));
      s.appendChild(table(["session", "start", "host", "pid", "first step", "last step", "end", "end reason", "world size"],
        r.sessions.map(function (x) {
          return [x.session, fmtTime(x.start), x.host, x.pid, x.first_step, x.last_step, x.end == null ? "-" : fmtTime(x.end), x.end_reason, x.world_size];
        })));
    });
  }

  /* ---- a uPlot chart of lines with min-max bands ---- */
  function nonfiniteMarks(marks) {
    return function (u) {
      if (!marks.length) return;
      var ctx = u.ctx, b = u.bbox, px = devicePixelRatio || 1;
      ctx.save();
      marks.forEach(function (m) {
        var x = u.valToPos(m.x, "x", true);
        if (!(x >= b.left && x <= b.left + b.width)) return;
        var y = m.value === "-inf" ? b.top + b.height - 2 * px : b.top + 2 * px, d = 5 * px, up = m.value !== "-inf";
        ctx.fillStyle = m.value === "nan" ? "#7b1fa2" : "#c62828";
        ctx.beginPath();
        ctx.moveTo(x, up ? y : y - d); ctx.lineTo(x - d, up ? y + d : y); ctx.lineTo(x + d, up ? y + d : y); ctx.closePath();
        ctx.fill();
      });
      ctx.restore();
    };
  }
  /* failures and alerts of the runs: a dashed vertical line at their step (or time), red
     for a failure, amber for an alert; the legend-free hover text is in the chart's notes */
  function eventLines(evs) {
    return function (u) {
      if (!evs.length) return;
      var ctx = u.ctx, b = u.bbox, px = devicePixelRatio || 1;
      ctx.save();
      ctx.setLineDash([4 * px, 3 * px]);
      ctx.lineWidth = px;
      evs.forEach(function (e) {
        var x = u.valToPos(e.x, "x", true);
        if (!(x >= b.left && x <= b.left + b.width)) return;
        ctx.strokeStyle = e.kind === "failure" ? "#c62828" : "#b26a00";
        ctx.beginPath(); ctx.moveTo(x, b.top); ctx.lineTo(x, b.top + b.height); ctx.stroke();
      });
      ctx.restore();
    };
  }
  /* uPlot joins a series' values with segments: a value with no other in its series (a
     metric logged once, the one sample of a machine) has none and would not be seen. The
     points filter hands uPlot such lone values to draw as dots (spanGaps joins the rest). */
  function lonePoints(u, si, show) {
    if (show) return null;  // uPlot draws every point already (a sparse series)
    var d = u.data[si], at = -1;
    for (var i = 0; i < d.length; i++) if (d[i] != null) { if (at >= 0) return null; at = i; }
    return at >= 0 ? [at] : null;
  }
  /* the x scale: the data's range; but around a single x value (one step, one sample) uPlot
     would span steps 0-20 or years of time, so it gets the step +-1 or the time +-1 minute */
  function xScale(def) {
    var sc = { time: !!def.time };
    if (def.x.length === 1) {
      var x0 = def.x[0], pad = def.time ? 60 : 1;
      sc.range = function () { return [x0 - pad, x0 + pad]; };
    }
    return sc;
  }
  var STEP_INCRS = [];  // ticks of a step axis: whole steps only (1, 2, 5, 10, 20, ...)
  for (var m = 1; m < 1e16; m *= 10) STEP_INCRS.push(m, 2 * m, 5 * m);
  function lineChart(box, def) {
    // def: {x, time, lines: [{label, color, line, lo, hi, per_bucket, width, dash}], marks: [{x, value}],
    //       onSelect: called with the x range a drag selected (nb serve fetches it again, finer)}
    var c = { def: def, box: box };
    function make() {
      var def = c.def;
      var width = Math.max(300, box.clientWidth || 520);
      var data = [def.x], series = [{ label: def.time ? "time" : "step", value: def.time ? function (u, v) { return v == null ? "-" : fmtTime(v); } : function (u, v) { return fmtInt(v); } }], bands = [];
      def.lines.forEach(function (l) {
        var w = def.bucketed ? Math.pow(state.smooth, Math.max(1, l.per_bucket || 1)) : state.smooth;
        data.push(positive(ema(l.line, w)));
        series.push({ label: l.label, stroke: l.color, width: l.width || 1.5, dash: l.dash, spanGaps: true, points: { filter: lonePoints, fill: l.color }, value: function (u, v) { return fmt(v); } });
        if (l.lo && l.hi) {
          data.push(positive(l.hi)); data.push(positive(l.lo));
          var hi = series.length, lo = hi + 1;
          series.push({ label: l.bandLabel + " max", stroke: alpha(l.color, 0.5), width: 0.75, spanGaps: true, points: { show: false, filter: lonePoints }, value: function (u, v) { return fmt(v); } });
          series.push({ label: l.bandLabel + " min", stroke: alpha(l.color, 0.5), width: 0.75, spanGaps: true, points: { show: false, filter: lonePoints }, value: function (u, v) { return fmt(v); } });
          bands.push({ series: [hi, lo], fill: alpha(l.color, 0.22) });
        }
      });
      var opts = {
        width: width, height: def.height || 260, series: series, bands: bands,
        scales: { x: xScale(def), y: state.logy ? { distr: 3 } : {} },
        axes: [def.time ? {} : { incrs: STEP_INCRS, values: function (u, vals) { return vals.map(fmtStep); } },
               { size: 64, values: function (u, vals) { return vals.map(fmtAxis); } }],
        cursor: { drag: { x: true, y: false }, points: { show: false } },
        legend: { live: true },
        hooks: { draw: [nonfiniteMarks(def.marks || []), eventLines(def.events || [])], setSelect: [function (u) {
          if (!def.onSelect || u.select.width < 2) return;
          def.onSelect(u.posToVal(u.select.left, "x"), u.posToVal(u.select.left + u.select.width, "x"));
        }] },
      };
      return new uPlot(opts, data, box);
    }
    c.make = make;
    c.u = make();
    charts.push(c);
    return c;
  }
  /* a chart given new data (nb serve: a zoom fetched again, new points of a live run) */
  function redraw(c, def) {
    c.def = def;
    if (c.u) c.u.destroy();
    c.u = c.make();
  }
  function rebuild() {
    charts.forEach(function (c) { if (c.u) { c.u.destroy(); c.u = c.make(); } });
  }

  /* ---- scalars: one chart per tag, every run in it ---- */
  function scalars() {
    if (!DATA.charts.length) return;
    var s = section("scalars", "Scalars");
    s.appendChild(el("p", { cls: "note", text: "Long series are stored as min/max buckets (at most " + fmtInt(DATA.max_buckets) +
      " per chart): the line is the bucket mean (across ranks: the median of the ranks' bucket means), the band the min and max of every point in the bucket, so a single-step spike stays visible. Smoothing applies to the line only." }));
    var grid = el("div", { cls: "grid" });
    s.appendChild(grid);
    DATA.charts.forEach(function (ch) { scalarCard(grid, ch); });
  }
  /* one scalar chart's lines, marks and notes, from one chart of the data (every run in it) */
  function scalarDef(ch) {
    var lines = [], marks = [], notes = [];
    ch.series.forEach(function (sr) {
      var i = DATA.runs.findIndex(function (r) { return r.id === sr.run; });
      var c = color(i < 0 ? 0 : i), n = sr.ranks.length;
      var many = n > 1, banded = many || ch.bucketed;
      lines.push({ label: sr.run + (many ? " median of " + n + " ranks" : ""), bandLabel: many ? "ranks" : "bucket", color: c,
        line: sr.line, lo: banded ? sr.lo : null, hi: banded ? sr.hi : null, per_bucket: sr.per_bucket });
      if (sr.outlier != null) {
        lines.push({ label: sr.run + " rank " + sr.outlier + " (farthest from the median)", color: c, width: 1, dash: [4, 3], line: sr.outlier_line, per_bucket: sr.per_bucket });
        notes.push(el("div", { cls: "note", text: sr.run + ": " + n + " ranks; farthest from the median: rank " + sr.outlier }));
      }
      sr.nonfinite.forEach(function (m) { marks.push(m); });
      if (sr.nonfinite_total) {
        var f = sr.nonfinite[0];
        notes.push(el("div", { cls: "note bad", text: sr.run + ": " + count(sr.nonfinite_total, "non-finite value") +
          " (marked ▲ at the top, ▼ for -inf; first: " + f.value + " at step " + fmtInt(f.x) + ", rank " + f.rank + ")" }));
      }
    });
    if (ch.summarised && ch.summarised.length) {
      notes.push(el("div", { cls: "note", text: ch.summarised.join(", ") + ": drawn from the writer's envelope (the min and max of " +
        "each segment of the long event log), not from every point: a spike stays visible, zooming shows segments" }));
    }
    if (!ch.series.length) notes.push(el("div", { cls: "note", text: "no point of " + ch.tag + " in this view" + (ch.rank != null ? " (rank " + ch.rank + ")" : "") }));
    var pts = ch.series.reduce(function (a, sr) { return a + sr.points; }, 0);
    var evs = [], where = ch.axis === "wall" ? "wall_time" : ch.axis === "active" ? null : "step";
    ch.series.forEach(function (sr) {
      var run = DATA.runs.filter(function (r) { return r.id === sr.run; })[0];
      if (!run || !where) return;
      (run.events || []).forEach(function (e) {
        if (e[where] == null) return;
        evs.push({ x: e[where], kind: e.kind });
        notes.push(el("div", { cls: "note" + (e.kind === "failure" ? " bad" : ""), text: (ch.series.length > 1 ? sr.run + ": " : "") +
          "┊ " + e.text + (e.step != null ? " (step " + fmtInt(e.step) + ")" : "") }));
      });
    });
    var unit = ch.axis && ch.axis !== "step" ? "second" : "step";
    notes.push(el("div", { cls: "note", text: count(pts, "point") + (ch.bucketed ? ", shown as " + count(ch.x.length, "bucket") + " of " + count(ch.x.length > 1 ? +(ch.x[1] - ch.x[0]).toPrecision(3) : 1, unit) : pts > 1 ? ", every point shown" : "") }));
    return { def: { x: ch.x, time: !!ch.time, bucketed: ch.bucketed, lines: lines, marks: marks, events: evs }, notes: notes };
  }
  /* a card with the chart of one tag; setScalar(c, ch) draws it again with new data */
  function scalarCard(grid, ch, onSelect) {
    var card = el("div", { cls: "card" }, el("h3", { text: ch.tag }));
    var box = el("div", { cls: "chart" }), notes = el("div", { cls: "notes" });
    card.appendChild(box);
    card.appendChild(notes);
    grid.appendChild(card);
    var made = scalarDef(ch);
    made.def.onSelect = onSelect;
    made.notes.forEach(function (n) { notes.appendChild(n); });
    var c = lineChart(box, made.def);
    c.chart = ch;
    c.tag = ch.tag;
    c.kind = "scalar";
    c.card = card;
    c.notes = notes;
    return c;
  }
  function setScalar(c, ch) {
    c.chart = ch;
    var made = scalarDef(ch);
    made.def.onSelect = c.def.onSelect;
    c.notes.textContent = "";
    made.notes.forEach(function (n) { c.notes.appendChild(n); });
    redraw(c, made.def);
  }

  /* ---- timers: rank x step heat map on a canvas ---- */
  var RAMP = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];  // dark = fast, yellow = slow
  function ramp(t) {
    t = Math.max(0, Math.min(1, t)) * (RAMP.length - 1);
    var i = Math.min(RAMP.length - 2, Math.floor(t)), f = t - i, a = RAMP[i], b = RAMP[i + 1];
    return [a[0] + (b[0] - a[0]) * f, a[1] + (b[1] - a[1]) * f, a[2] + (b[2] - a[2]) * f];
  }
  function heatMap(card, h) {
    var rows = h.ranks.length, cols = h.x.length, margin = 56;
    var rowPx = Math.max(2, Math.min(16, Math.floor(320 / Math.max(1, rows))));
    var wrap = el("div", { cls: "heat" }), canvas = el("canvas");
    wrap.appendChild(canvas);
    card.appendChild(wrap);
    var cssW = Math.max(300, card.clientWidth - 20), cssH = rows * rowPx + 18, px = devicePixelRatio || 1;
    canvas.width = Math.round(cssW * px); canvas.height = Math.round(cssH * px);
    canvas.style.height = cssH + "px";
    var ctx = canvas.getContext("2d");
    ctx.scale(px, px);
    ctx.fillStyle = "#ffffff"; ctx.fillRect(0, 0, cssW, cssH);
    var plotW = cssW - margin, cellW = plotW / Math.max(1, cols), lo = h.lo, hi = h.hi, span = hi > lo ? hi - lo : 1;
    var strag = {};
    h.stragglers.forEach(function (r) { strag[r] = true; });
    for (var r = 0; r < rows; r++) {
      var line = h.cells[r];
      for (var c = 0; c < cols; c++) {
        var v = line[c];
        if (v == null) ctx.fillStyle = "#e6e8ec";
        else { var rgb = ramp((v - lo) / span); ctx.fillStyle = "rgb(" + (rgb[0] | 0) + "," + (rgb[1] | 0) + "," + (rgb[2] | 0) + ")"; }
        ctx.fillRect(margin + c * cellW, r * rowPx, Math.ceil(cellW), rowPx);
      }
    }
    ctx.font = "10px system-ui, sans-serif"; ctx.textBaseline = "middle";
    var every = Math.ceil(12 / rowPx);
    for (r = 0; r < rows; r++) {
      var rank = h.ranks[r];
      if (strag[rank] || r % every === 0) {
        ctx.fillStyle = strag[rank] ? "#c62828" : "#667085";
        ctx.fillText((strag[rank] ? "▶ " : "") + "rank " + rank, 2, r * rowPx + rowPx / 2);
      }
    }
    ctx.fillStyle = "#667085"; ctx.textBaseline = "top";
    ctx.fillText("step " + fmtInt(h.x[0]), margin, rows * rowPx + 4);
    var endLabel = "step " + fmtInt(h.x[cols - 1]);
    ctx.fillText(endLabel, cssW - ctx.measureText(endLabel).width - 2, rows * rowPx + 4);
    var tip = document.getElementById("tooltip");
    canvas.addEventListener("mousemove", function (e) {
      var b = canvas.getBoundingClientRect(), x = e.clientX - b.left - margin, y = e.clientY - b.top;
      var c = Math.floor(x / cellW), r = Math.floor(y / rowPx);
      if (c < 0 || c >= cols || r < 0 || r >= rows) { tip.hidden = true; return; }
      var step = h.x[c], next = c + 1 < cols ? h.x[c + 1] - 1 : null, v = h.cells[r][c];
      tip.textContent = "rank " + h.ranks[r] + ", step " + fmtInt(step) + (h.bucketed && next != null ? "–" + fmtInt(next) : "") + ": " + (v == null ? "no timing" : fmt(v) + " s") + (strag[h.ranks[r]] ? " (straggler)" : "");
      tip.style.left = (e.clientX + 12) + "px"; tip.style.top = (e.clientY + 12) + "px"; tip.hidden = false;
    });
    canvas.addEventListener("mouseleave", function () { tip.hidden = true; });
    var scale = el("canvas", { width: "160", height: "10" }), sctx = scale.getContext("2d");
    for (var i = 0; i < 160; i++) { var q = ramp(i / 159); sctx.fillStyle = "rgb(" + (q[0] | 0) + "," + (q[1] | 0) + "," + (q[2] | 0) + ")"; sctx.fillRect(i, 0, 1, 10); }
    card.appendChild(el("div", { cls: "scale" }, el("span", { text: fmt(lo) + " s" }), scale, el("span", { text: fmt(hi) + " s (1st–99th percentile; grey: no timing)" })));
    charts.push({ kind: "heat", tag: h.tag, canvas: canvas, u: null, make: null });
  }
  function timers() {
    var any = DATA.runs.some(function (r) { return r.timers.length; });
    if (!any) return;
    var s = section("timers", "Timers");
    var rule = null;
    DATA.runs.forEach(function (r) { r.timers.forEach(function (h) { rule = rule || h.rule; }); });
    s.appendChild(el("p", { cls: "note", text: "Mean seconds per rank (rows) and step bucket (columns). Stragglers by nb timers' rule: a rank whose lower median " +
      "per step (the first " + rule.warmup_steps + " step(s) of each session, and the steps from where a rank failed or died, left out) is at least " +
      rule.threshold + "x the median of the ranks' and " + fmt(rule.floor_s) + " s above it." }));
    DATA.runs.forEach(function (run) {
      if (!run.timers.length) return;
      if (DATA.runs.length > 1) s.appendChild(el("h3", { text: run.id }));
      run.timers.forEach(function (h) {
        var card = el("div", { cls: "card" }, el("h3", { text: h.tag }));
        s.appendChild(card);
        var who = h.stragglers.length ? "stragglers: " + h.stragglers.map(function (r) { return "rank " + r; }).join(", ") : "no straggler";
        card.appendChild(el("div", { cls: "note" + (h.stragglers.length ? " bad" : ""), text: who + (h.slowest_rank != null ? "; slowest rank " + h.slowest_rank + (h.spread != null ? ", spread " + h.spread.toFixed(2) + "x (its lower median per step / the ranks' median)" : "") : "; too few steps to judge") + "; " + count(h.ranks.length, "rank") }));
        heatMap(card, h);
      });
    });
  }

  /* ---- system metrics per machine, one line per GPU ---- */
  function system() {
    var any = DATA.runs.some(function (r) { return r.system.length; });
    if (!any) return;
    var s = section("system", "System");
    DATA.runs.forEach(function (run) {
      run.system.forEach(function (m) {
        s.appendChild(el("h3", { text: (DATA.runs.length > 1 ? run.id + " · " : "") + m.hostname + " (sampled by rank " + m.rank + (m.gpus ? ", " + m.gpus + " GPUs" : "") + ")" }));
        var grid = el("div", { cls: "grid small" });
        s.appendChild(grid);
        m.charts.forEach(function (ch) {
          var card = el("div", { cls: "card" }, el("h3", { text: ch.metric }));
          var box = el("div", { cls: "chart" });
          card.appendChild(box);
          grid.appendChild(card);
          var c = lineChart(box, { x: ch.x, time: true, bucketed: ch.bucketed, height: 180, lines: ch.series.map(function (sr, i) {
            return { label: sr.label, bandLabel: sr.label, color: color(i), line: sr.line, lo: ch.bucketed ? sr.lo : null, hi: ch.bucketed ? sr.hi : null, per_bucket: 1 };
          }) });
          c.tag = ch.metric; c.kind = "system";
        });
      });
    });
  }

  function texts() {
    var any = DATA.runs.some(function (r) { return r.text.rows.length; });
    if (!any) return;
    var s = section("text", "Text");
    DATA.runs.forEach(function (run) {
      if (!run.text.rows.length) return;
      s.appendChild(el("h3", { text: run.id + (run.text.total > run.text.rows.length ? " (the latest " + run.text.rows.length + " of " + run.text.total + ")" : "") }));
      var t = table(["step", "rank", "tag", "text"], []);
      run.text.rows.forEach(function (x) {
        t.appendChild(el("tr", null, el("td", { cls: "num", text: fmtInt(x.step) }), el("td", { cls: "num", text: String(x.rank) }),
          el("td", { text: x.tag }), el("td", null, el("pre", { cls: "text", text: x.text }))));
      });
      s.appendChild(t);
    });
  }

  function images() {
    var any = DATA.runs.some(function (r) { return r.images.rows.length; });
    if (!any) return;
    var s = section("images", "Images");
    DATA.runs.forEach(function (run) {
      var im = run.images;
      if (!im.rows.length) return;
      s.appendChild(el("h3", { text: run.id + " (" + fmtInt(im.rows.length) + " of " + count(im.total, "image") + (im.failed ? ", " + fmtInt(im.failed) + " unreadable" : "") + ")" }));
      var box = el("div", { cls: "thumbs" });
      im.rows.forEach(function (x) {
        box.appendChild(el("figure", null, el("img", { src: "data:image/png;base64," + x.png, alt: x.tag }),
          el("figcaption", { text: x.tag + " · step " + fmtInt(x.step) + (x.caption ? " · " + x.caption : "") })));
      });
      s.appendChild(box);
    });
  }

  /* the page for data (the dict of nbcli/report/_data.py's build): every section, or
     those named in parts (nb serve draws the runs first, the rest when it arrives) */
  var SECTIONS = { runs: runs, scalars: scalars, timers: timers, system: system, text: texts, images: images };
  function draw(data, parts) {
    DATA = data;
    window.nbData = DATA;
    main = document.getElementById("main");
    toc = document.getElementById("toc");
    (parts || ["runs", "scalars", "timers", "system", "text", "images"]).forEach(function (p) { SECTIONS[p](); });
  }
  /* what nb serve's page (serve.js) draws with: one chart code base for both pages */
  window.nbReport = { draw: draw, el: el, fmt: fmt, fmtInt: fmtInt, fmtTime: fmtTime, count: count, table: table,
    section: section, scalarCard: scalarCard, setScalar: setScalar, lineChart: lineChart, redraw: redraw,
    heatMap: heatMap, color: color, charts: charts };
  var inline = document.getElementById("nb-data");
  if (inline) draw(JSON.parse(inline.textContent));

  var slider = document.getElementById("smooth"), out = document.getElementById("smooth-value");
  slider.addEventListener("input", function () {
    state.smooth = +slider.value; out.textContent = state.smooth.toFixed(2);
    rebuild();
  });
  document.getElementById("logy").addEventListener("change", function (e) { state.logy = e.target.checked; rebuild(); });
  var timer = null, lastW = window.innerWidth;
  window.addEventListener("resize", function () {
    if (window.innerWidth === lastW) return;
    lastW = window.innerWidth; clearTimeout(timer);
    timer = setTimeout(function () { charts.forEach(function (c) { if (c.u) c.u.setSize({ width: Math.max(300, c.box.clientWidth), height: c.u.height }); }); }, 150);
  });
  if (inline) window.nbReady = true;
})();
