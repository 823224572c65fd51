/* nb serve: the runs table, and the views of selected runs drawn by nb report's report.js
 * (window.nbReport: one chart code base), kept live by the server's event stream.
 * Logged strings (tags, names, config) only ever go into textContent, never into HTML. */
(function () {
  "use strict";
  var R = window.nbReport, el = R.el;
  var MAX_ROWS = 2000;       // rows of the runs table drawn at once (the filter narrows the rest)
  var MAX_BUCKETS = 2000;    // a chart never asks for more buckets than this
  var LIVE_EVERY_MS = 500;   // charts with new points are fetched again at most this often
  var RUNS_EVERY_MS = 5000;  // the runs table is listed again this often
  var params = new URLSearchParams(location.search);
  var ids = (params.get("runs") || "").split(",").filter(Boolean);
  window.nbServeReady = false;
  window.nbRunsReady = false;
  window.nbUpdates = 0;      // charts drawn again with new points (for tests and the console)

  function get(url) {
    return fetch(url, { credentials: "same-origin", cache: "no-store" }).then(function (r) {
      return r.json().then(function (j) {
        if (!r.ok) throw new Error(j && j.error ? j.error : r.status + " " + r.statusText);
        return j;
      });
    });
  }
  function q(obj) {
    var p = new URLSearchParams();
    Object.keys(obj).forEach(function (k) { if (obj[k] != null && obj[k] !== "") p.set(k, obj[k]); });
    return p.toString();
  }
  function ago(t) {
    if (t == null) return "-";
    var s = Math.max(0, Date.now() / 1000 - t);
    if (s < 60) return Math.round(s) + " s ago";
    if (s < 3600) return Math.round(s / 60) + " min ago";
    if (s < 86400) return (s / 3600).toFixed(1) + " h ago";
    return (s / 86400).toFixed(1) + " d ago";
  }

  /* ---- the runs table ------------------------------------------------------------ */
  var table = { rows: [], sort: null, desc: false, selected: {} };
  function cellValue(row, col) { return col.get(row); }
  function columns(rows) {
    var cols = [
      { name: "status", get: function (r) { return r.status; } },
      { name: "name", get: function (r) { return r.name; } },
      { name: "id", get: function (r) { return r.id; } },
      { name: "project", get: function (r) { return r.project; } },
      { name: "ranks", get: function (r) { return r.ranks; }, num: true },
      { name: "last step", get: function (r) { return r.last_step; }, num: true },
      { name: "updated", get: function (r) { return r.last_write; }, show: ago, num: true },
    ];
    /* config keys whose values differ between the runs listed, then the tags most runs have */
    var seen = {}, order = [], tags = {}, torder = [];
    rows.forEach(function (r) {
      Object.keys(r.config || {}).forEach(function (k) {
        var v = JSON.stringify(r.config[k]);
        if (!(k in seen)) { seen[k] = {}; order.push(k); }
        seen[k][v] = true;
      });
      Object.keys(r.last || {}).forEach(function (t) { if (!(t in tags)) { tags[t] = 0; torder.push(t); } tags[t]++; });
    });
    var differ = order.filter(function (k) { return Object.keys(seen[k]).length > 1 || rows.length === 1; }).slice(0, 8);
    differ.forEach(function (k) {
      cols.push({ name: k, get: function (r) { return r.config ? r.config[k] : null; }, config: true });
    });
    torder.sort(function (a, b) { return tags[b] - tags[a] || (a < b ? -1 : 1); }).slice(0, 6).forEach(function (t) {
      cols.push({ name: t, get: function (r) { return r.last ? r.last[t] : null; }, num: true, tag: true });
    });
    var group = document.getElementById("group"), had = group.value;
    group.textContent = "";
    group.appendChild(el("option", { value: "", text: "nothing" }));
    ["status", "project", "name"].concat(order).forEach(function (k) { group.appendChild(el("option", { value: k, text: k })); });
    group.value = had;
    return cols;
  }
  function compare(a, b) {
    if (a == null) return b == null ? 0 : 1;
    if (b == null) return -1;
    if (typeof a === "number" && typeof b === "number") return a - b;
    a = typeof a === "string" ? a : JSON.stringify(a); b = typeof b === "string" ? b : JSON.stringify(b);
    return a < b ? -1 : a > b ? 1 : 0;
  }
  function drawRuns() {
    var t0 = performance.now();
    var rows = table.rows.slice(), cols = columns(rows), tbl = document.getElementById("runs-table");
    if (table.sort != null) {
      var col = cols.filter(function (c) { return c.name === table.sort; })[0];
      if (col) rows.sort(function (a, b) { var d = compare(col.get(a), col.get(b)); return table.desc ? -d : d; });
    }
    var groupKey = document.getElementById("group").value;
    var groupOf = function (r) {
      if (!groupKey) return null;
      var v = groupKey in r ? r[groupKey] : (r.config || {})[groupKey];
      return v === undefined ? null : v;
    };
    if (groupKey) rows.sort(function (a, b) { return compare(groupOf(a), groupOf(b)); });
    tbl.textContent = "";
    var head = el("tr", null, el("th", { text: "" }));
    cols.forEach(function (c) {
      var th = el("th", { text: c.name, cls: table.sort === c.name ? "sorted" + (table.desc ? " desc" : "") : "" });
      th.addEventListener("click", function () {
        if (table.sort === c.name) table.desc = !table.desc; else { table.sort = c.name; table.desc = false; }
        drawRuns();
      });
      head.appendChild(th);
    });
    tbl.appendChild(head);
    var shown = rows.slice(0, MAX_ROWS), last = {};
    shown.forEach(function (r) {
      if (groupKey) {
        var g = JSON.stringify(groupOf(r));
        if (g !== last.g) {
          last.g = g;
          var n = rows.filter(function (x) { return JSON.stringify(groupOf(x)) === g; }).length;
          tbl.appendChild(el("tr", { cls: "group" }, el("td", { colspan: String(cols.length + 1), text: groupKey + " = " + (g === undefined ? "-" : g) + " (" + R.count(n, "run") + ")" })));
        }
      }
      var box = el("input", { type: "checkbox" });
      box.checked = !!table.selected[r.id];
      box.addEventListener("change", function () {
        if (box.checked) table.selected[r.id] = true; else delete table.selected[r.id];
        selectionChanged();
      });
      var tr = el("tr", { cls: "run", "data-id": r.id }, el("td", null, box));
      cols.forEach(function (c) {
        var v = c.get(r), td;
        if (c.name === "name" || c.name === "id") {
          td = el("td", null, el("a", { href: "?" + q({ runs: r.id }), text: v == null ? "-" : String(v) }));
        } else {
          td = el("td", { cls: (c.num ? "num " : "") + (c.name === "status" ? "status-" + v : ""),
                          text: c.show ? c.show(v) : R.fmt(v) });
        }
        tr.appendChild(td);
      });
      tbl.appendChild(tr);
    });
    var note = R.count(table.rows.length, "run") + (rows.length > MAX_ROWS ? "; the first " + R.fmtInt(MAX_ROWS) + " shown: filter to see the rest" : "");
    document.getElementById("runs-note").textContent = note;
    window.nbRunsDrawMs = performance.now() - t0;
    window.nbRunsReady = true;
  }
  function selectionChanged() {
    var n = Object.keys(table.selected).length, b = document.getElementById("compare");
    b.disabled = n === 0;
    b.textContent = n ? "compare " + R.count(n, "selected run") : "compare selected";
  }
  var listing = 0;
  function loadRuns() {
    var where = document.getElementById("where").value.trim(), mine = ++listing;
    var t0 = performance.now();
    return get("api/runs?" + q({ "with": "config", where: where })).then(function (rows) {
      if (mine !== listing) return;
      window.nbRunsFetchMs = performance.now() - t0;  // the request and the parse of its JSON
      document.getElementById("runs-error").hidden = true;
      table.rows = rows;
      drawRuns();
    }, function (e) {
      if (mine !== listing) return;
      var box = document.getElementById("runs-error");
      box.textContent = "filter: " + e.message;
      box.hidden = false;
      window.nbRunsReady = true;
    });
  }
  function runsView() {
    document.getElementById("runs-view").hidden = false;
    document.getElementById("title").textContent = "runs";
    document.getElementById("controls").style.display = "none";
    document.getElementById("filter").addEventListener("submit", function (e) { e.preventDefault(); loadRuns(); });
    var typing = null;
    document.getElementById("where").addEventListener("input", function () { clearTimeout(typing); typing = setTimeout(loadRuns, 300); });
    document.getElementById("group").addEventListener("change", drawRuns);
    document.getElementById("compare").addEventListener("click", function () {
      location.search = "?" + q({ runs: Object.keys(table.selected).join(",") });
    });
    loadRuns();
    setInterval(function () { if (!document.hidden) loadRuns(); }, RUNS_EVERY_MS);
  }

  /* ---- the view of selected runs ------------------------------------------------ */
  var cards = {};   // tag -> {grid, holder, c (the chart once drawn), zoom: [start, end] or null, busy, again}
  var scalarGrid = null;
  function rankParam() { return document.getElementById("rank").value; }
  function axisParam() { return document.getElementById("xaxis").value; }
  function buckets(box) { return Math.max(50, Math.min(MAX_BUCKETS, Math.round((box && box.clientWidth) || 520))); }
  function fetchChart(tag) {
    var card = cards[tag];
    if (card.busy) { card.again = true; return; }
    card.busy = true;
    var box = card.c ? card.c.box : card.holder;
    var args = { runs: ids.join(","), tag: tag, buckets: buckets(box), rank: rankParam(), x: axisParam() };
    if (card.zoom) { args.start = Math.floor(card.zoom[0]); args.end = Math.ceil(card.zoom[1]); }
    get("api/chart?" + q(args)).then(function (ch) {
      if (!card.c) {
        var c = R.scalarCard(scalarGrid, ch, function (lo, hi) { card.zoom = [lo, hi]; fetchChart(tag); });
        scalarGrid.replaceChild(c.card, card.holder);
        c.box.addEventListener("dblclick", function () { if (card.zoom) { card.zoom = null; fetchChart(tag); } });
        card.c = c;
        if (!window.nbServeReady) { window.nbServeReady = true; window.nbFirstChartMs = performance.now(); }
      } else {
        R.setScalar(card.c, ch);
        window.nbUpdates++;
      }
      card.c.lastStep = ch.x.length ? ch.x[ch.x.length - 1] : null;
      Object.keys(ch.damage || {}).forEach(function (run) {  // never silent: what the chart lacks
        ch.damage[run].forEach(function (d) {
          card.c.notes.appendChild(el("div", { cls: "note bad", text: run + ": rank " + d.rank + " session " + d.session + ": " +
            R.fmtInt(d.bytes) + " bytes damaged at bytes " + d.start + "-" + d.stop + (d.lost ? ", " + (d.points == null ? "an unknown number of" : R.fmtInt(d.points)) + " points left out" : ", nothing lost (copy read)") }));
        });
      });
    }, function (e) {
      var where = card.c ? card.c.notes : card.holder;  // once drawn, the holder is no longer in the page
      if (!card.c) where.textContent = "";
      where.appendChild(el("div", { cls: "note bad", text: tag + ": " + e.message }));
    }).then(function () {
      card.busy = false;
      if (card.again) { card.again = false; fetchChart(tag); }
    });
  }
  var seen = new IntersectionObserver(function (entries) {
    entries.forEach(function (e) {
      if (!e.isIntersecting) return;
      seen.unobserve(e.target);
      fetchChart(e.target.getAttribute("data-tag"));
    });
  }, { rootMargin: "400px" });
  function addCard(tag) {
    if (cards[tag]) return;
    var holder = el("div", { cls: "card waiting", "data-tag": tag }, el("h3", { text: tag }), el("div", { cls: "chart note", text: "loading…" }));
    var after = Object.keys(cards).filter(function (t) { return t > tag; }).sort()[0];
    scalarGrid.insertBefore(holder, after ? (cards[after].c ? cards[after].c.card : cards[after].holder) : null);
    cards[tag] = { holder: holder, c: null, zoom: null, busy: false, again: false };
    seen.observe(holder);
  }
  function scalarSection(tags) {
    var main = document.getElementById("main");
    var s = el("section", { id: "scalars" }, el("h2", { text: "Scalars" }));
    s.appendChild(el("p", { cls: "note", text: "Each chart asks the server for as many min/max buckets as it is wide: the line is the bucket mean " +
      "(across ranks: the median of the ranks' means), the band the min and max of every point in it, so a one-step spike stays visible. " +
      "Drag to zoom: finer buckets are fetched. New points appear as the run flushes them." }));
    scalarGrid = el("div", { cls: "grid" });
    s.appendChild(scalarGrid);
    /* the charts first: what a comparison is opened for (the runs' tables follow them) */
    main.insertBefore(s, main.firstChild);
    var link = el("a", { href: "#scalars", text: "Scalars" }), toc = document.getElementById("toc");
    toc.insertBefore(link, toc.firstChild);
    tags.forEach(addCard);
    var damaged = (window.nbData.runs || []).some(function (r) { return (r.damage || []).length; });
    if (!tags.length) {
      s.appendChild(el("p", { cls: "note" + (damaged ? " bad" : ""), text: damaged ? "no scalar could be read: the event logs are damaged (see Runs)"
        : "no scalar yet: charts appear as points arrive" }));
    }
  }
  function diffSection(d) {
    var s = R.section("diff", "Diff of " + d.runs.map(function (r) { return r.label; }).join(" and "));
    var changes = (d.config && d.config.changes) || [];
    s.appendChild(el("h3", { text: "Config: " + R.count(changes.length, "key") + " differ" + (d.config ? ", " + R.count(d.config.equal || 0, "key") + " equal" : "") }));
    if (changes.length) {
      s.appendChild(R.table(["key"].concat(d.runs.map(function (r) { return r.label; })), changes.map(function (c) {
        return [c.key].concat((c.values || []).map(function (v) { return v === undefined ? "-" : JSON.stringify(v); }));
      }), null, "kv diff"));
    }
    var tags = ((d.tags && d.tags.common) || []).filter(function (t) { return t.differs; });
    s.appendChild(el("h3", { text: "Tags whose last value differs: " + tags.length }));
    if (tags.length) {
      s.appendChild(R.table(["tag"].concat(d.runs.map(function (r) { return r.label + " last"; })), tags.map(function (t) {
        return [t.tag].concat(t.last);
      }), null, "kv"));
    }
  }
  /* each rank's console (init(console=True)): the last lines of the rank picked, kept up to date */
  function consoleSection() {
    var pick = el("select"), pre = el("pre", { cls: "text console" }), note = el("span", { cls: "note" });
    var run = el("select");
    ids.forEach(function (id) { run.appendChild(el("option", { value: id, text: id })); });
    var s = R.section("console", "Console");
    s.appendChild(el("div", { cls: "console-controls" }, el("label", { text: "run " }, run), el("label", { text: " rank " }, pick), note));
    s.appendChild(pre);
    function load(first) {
      get("api/runs/" + encodeURIComponent(run.value) + "/console?" + q({ rank: pick.value, last: 300 })).then(function (c) {
        if (first || !pick.options.length) {
          pick.textContent = "";
          c.ranks.forEach(function (k) { pick.appendChild(el("option", { value: String(k), text: String(k) })); });
          if (c.rank != null) pick.value = String(c.rank);
        }
        pre.textContent = c.lines.map(function (l) {
          return (l.step == null ? "" : "[step " + l.step + "] ") + (l.stream === "stderr" ? "! " : "") + l.text;
        }).join("\n");
        note.textContent = c.ranks.length ? " the last " + R.count(c.lines.length, "line") : " no console recorded (nb.init(console=True) records it)";
      }, function (e) { note.textContent = " " + e.message; });
    }
    run.addEventListener("change", function () { load(true); });
    pick.addEventListener("change", function () { load(false); });
    load(true);
    setInterval(function () { if (!document.hidden && pick.value !== "") load(false); }, RUNS_EVERY_MS);
  }
  /* where each run is (status, last step and when it last wrote), kept up to date from the
     runs listing (the Runs section below is what the page read when it opened) */
  function statusLine() {
    var line = document.getElementById("runstatus");
    function show() {
      get("api/runs").then(function (rows) {
        var mine = rows.filter(function (r) { return ids.indexOf(r.id) >= 0; });
        line.textContent = mine.map(function (r) {
          return (ids.length > 1 ? r.id + ": " : "") + r.status + ", step " + R.fmtInt(r.last_step) + ", wrote " + ago(r.last_write);
        }).join("; ");
      }, function () {});
    }
    show();
    setInterval(function () { if (!document.hidden) show(); }, RUNS_EVERY_MS);
  }
  function live() {
    var dirty = {}, dot = document.getElementById("live");
    var src = new EventSource("api/stream?" + q({ runs: ids.join(",") }));
    var opened = false;
    src.onopen = function () {
      dot.className = "hint on"; dot.textContent = "live";
      /* a stream opened again (a restarted server, a dropped tunnel) carries only what is flushed
         from now on: what was flushed while it was down is fetched with the charts again */
      if (opened) Object.keys(cards).forEach(function (tag) { dirty[tag] = true; });
      opened = true;
    };
    src.onerror = function () { dot.className = "hint off"; dot.textContent = "reconnecting"; };
    src.onmessage = function (m) {
      var e = JSON.parse(m.data);
      window.nbLastEvent = e;
      if (!cards[e.tag]) addCard(e.tag);
      else dirty[e.tag] = true;
    };
    setInterval(function () {
      Object.keys(dirty).forEach(function (tag) {
        delete dirty[tag];
        if (cards[tag] && cards[tag].c) fetchChart(tag);
      });
    }, LIVE_EVERY_MS);
  }
  function runView() {
    document.getElementById("title").textContent = ids.join(", ");
    document.title = "nb serve: " + ids.join(", ");
    get("api/page?" + q({ runs: ids.join(","), part: "info" })).then(function (data) {
      R.draw(data, ["runs"]);
      var ranks = {};
      data.runs.forEach(function (r) { (r.ranks || []).forEach(function (k) { ranks[k] = true; }); });
      var sel = document.getElementById("rank");
      Object.keys(ranks).map(Number).sort(function (a, b) { return a - b; }).forEach(function (k) {
        sel.appendChild(el("option", { value: String(k), text: "rank " + k }));
      });
      var again = function () { Object.keys(cards).forEach(function (t) { cards[t].zoom = null; if (cards[t].c) fetchChart(t); }); };
      sel.addEventListener("change", again);
      document.getElementById("xaxis").addEventListener("change", again);
      scalarSection(data.tags || []);
      if (!(data.tags || []).length) window.nbServeReady = true;
      live();
      statusLine();
      /* timers, system metrics, text and images read every rank's logs: drawn when they come */
      get("api/page?" + q({ runs: ids.join(","), part: "details" })).then(function (more) {
        R.draw(more, ["timers", "system", "text", "images"]);
        /* the runs' failures and alerts came with them: marked on the charts drawn so far */
        Object.keys(cards).forEach(function (t) { if (cards[t].c) R.setScalar(cards[t].c, cards[t].c.chart); });
        consoleSection();
        window.nbDetailsReady = true;
        if (ids.length >= 2) return get("api/diff?" + q({ runs: ids.join(",") })).then(diffSection);
      }).catch(function (e) {
        document.getElementById("main").appendChild(el("p", { cls: "note bad", text: e.message }));
      });
    }, function (e) {
      document.getElementById("main").appendChild(el("p", { cls: "note bad", text: e.message }));
      window.nbServeReady = true;
    });
  }

  if (ids.length) runView(); else runsView();
})();
