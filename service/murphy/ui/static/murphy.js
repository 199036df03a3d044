// murphy's dashboard helpers: JSON numbers, badges, one live EventSource per page, and uPlot
// charts fed by the server's min/max buckets. Plain script (no build step), one global: Murphy.
"use strict";
(function () {
  const M = {};
  // The server writes NaN/±Inf as "NaN"/"Infinity"/"-Infinity"; Number() parses those back.
  M.num = (v) => (v === null || v === undefined ? null : Number(v));
  M.fmt = (v) => {
    if (v === null || v === undefined) return "";
    const n = Number(v);
    if (!Number.isFinite(n)) return String(n);
    if (n !== 0 && (Math.abs(n) >= 1e5 || Math.abs(n) < 1e-3)) return n.toExponential(2);
    return String(Math.round(n * 1e4) / 1e4);
  };
  M.esc = (s) => String(s === null || s === undefined ? "" : s).replace(/[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
  M.badge = (s) => `<span class="badge b-${M.esc(s)}">${M.esc(s)}</span>`;
  M.duration = (s) => {
    if (s === null || s === undefined) return "";
    s = Math.round(s);
    return s < 60 ? `${s}s` : s < 3600 ? `${Math.floor(s / 60)}m ${s % 60}s` : `${Math.floor(s / 3600)}h ${Math.floor(s / 60) % 60}m`;
  };
  // Under --auth sigv4 the dashboard runs on a login session (/ui/login): state-changing calls
  // echo the session's CSRF token (a cookie this script can read) in X-Murphy-Csrf.
  M.csrf = () => {
    const m = document.cookie.match(/(?:^|;\s*)murphy_csrf=([^;]*)/);
    return m ? decodeURIComponent(m[1]) : "";
  };
  M.post = (url) => fetch(url, { method: "POST", headers: { "X-Murphy-Csrf": M.csrf() } });
  document.addEventListener("DOMContentLoaded", () => {
    const out = document.getElementById("logout");
    if (!out || !M.csrf()) return;
    out.hidden = false;
    out.addEventListener("click", async () => {
      await M.post("/ui/logout");
      window.location.assign("/ui/login");
    });
  });
  M.getJSON = async (url) => {
    const r = await fetch(url, { headers: { Accept: "application/json" } });
    if (!r.ok) {
      let msg = r.statusText;
      try { msg = (await r.json()).message || msg; } catch (e) { /* not JSON */ }
      throw new Error(`${r.status} ${msg}`);
    }
    return r.json();
  };
  // One EventSource per page; handlers by event name.
  M.live = (url, handlers) => {
    const dot = document.getElementById("live");
    const es = new EventSource(url);
    es.onopen = () => dot && dot.classList.add("on");
    es.onerror = () => dot && dot.classList.remove("on");
    for (const [name, fn] of Object.entries(handlers)) {
      es.addEventListener(name, (e) => { try { fn(JSON.parse(e.data)); } catch (err) { console.warn(err); } });
    }
    window.addEventListener("beforeunload", () => es.close());
    return es;
  };

  // ---- charts ----------------------------------------------------------------------------------
  const KIND_COLOR = { NaN: "#d00", Infinity: "#a0f", "-Infinity": "#06c" };

  // A chart of one tensor statistic: line = each bucket's last value, band = its finite min..max,
  // a red rail of ticks where values were non-finite, a dashed line at the first non-finite step,
  // and markers (rule findings, job events).
  class Chart {
    constructor(el, opts) {
      this.el = el; this.url = opts.url; this.title = opts.title; this.log = !!opts.log;
      this.markers = opts.markers || []; this.zoom = null; this.doc = null; this.plot = null;
      this.width = Math.max(300, el.clientWidth || 520); this.onZoom = opts.onZoom || (() => {});
      this.painted = false; this.busy = null;
    }
    _data(doc) {
      const x = doc.steps, pos = (v) => (v === null || !Number.isFinite(v) || (this.log && v <= 0) ? null : v);
      return [x, doc.last.map((v) => pos(M.num(v))), doc.min.map((v) => pos(M.num(v))), doc.max.map((v) => pos(M.num(v)))];
    }
    _make(data) {
      const self = this;
      const opts = {
        width: this.width, height: 220, title: this.title,
        scales: { x: { time: false }, y: { distr: this.log ? 3 : 1 } },
        axes: [{}, { size: 80, values: (u, vals) => vals.map((v) => (v === null ? "" : M.fmt(v))) }],
        series: [{ label: "step" },
          { label: "value", stroke: "#2563eb", width: 1.5, spanGaps: false, value: (u, v) => M.fmt(v) },
          { label: "min", stroke: "rgba(37,99,235,0.25)", width: 1, value: (u, v) => M.fmt(v) },
          { label: "max", stroke: "rgba(37,99,235,0.25)", width: 1, value: (u, v) => M.fmt(v) }],
        bands: [{ series: [3, 2], fill: "rgba(37,99,235,0.12)" }],
        cursor: { drag: { x: true, y: false } },
        hooks: {
          draw: [(u) => self._overlay(u)],
          setSelect: [(u) => {
            if (u.select.width > 2) {
              const x0 = Math.floor(u.posToVal(u.select.left, "x")), x1 = Math.ceil(u.posToVal(u.select.left + u.select.width, "x"));
              u.setSelect({ left: 0, width: 0, top: 0, height: 0 }, false);
              self.onZoom(x0, x1);
            }
          }],
        },
      };
      opts.cursor.drag.setScale = false;  // zoom goes through the server (full resolution)
      if (this.plot) this.plot.destroy();
      this.plot = new uPlot(opts, data, this.el);
    }
    _overlay(u) {
      const ctx = u.ctx, doc = this.doc;
      if (!doc) return;
      const top = u.bbox.top, h = u.bbox.height, bottom = top + h;
      ctx.save();
      const min = u.scales.x.min, max = u.scales.x.max;
      const px = (s) => u.valToPos(s, "x", true);
      for (const [a, b, kind] of doc.nonfinite) {  // the non-finite rail
        if (b < min || a > max) continue;
        const l = px(Math.max(a, min)), r = px(Math.min(b, max));
        ctx.fillStyle = KIND_COLOR[kind] || "#d00";
        ctx.fillRect(l - 2, bottom - 10, Math.max(4, r - l + 4), 10);
      }
      const line = (step, color, dash, label) => {
        if (step === null || step === undefined || step < min || step > max) return;
        const x = px(step);
        ctx.strokeStyle = color; ctx.lineWidth = 2; ctx.setLineDash(dash);
        ctx.beginPath(); ctx.moveTo(x, top); ctx.lineTo(x, bottom); ctx.stroke();
        if (label) { ctx.setLineDash([]); ctx.fillStyle = color; ctx.textAlign = "left"; ctx.textBaseline = "alphabetic"; ctx.font = `${11 * devicePixelRatio}px sans-serif`; ctx.fillText(label, x + 4, top + 12 * devicePixelRatio); }
      };
      line(doc.first_nonfinite_step, "#d00", [6, 4], `first non-finite @ ${doc.first_nonfinite_step}`);
      for (const m of this.markers) line(m.step, m.kind === "finding" ? "#b45309" : "#555", [2, 3], null);
      ctx.restore();
      if (!this.painted) this.paintedAt = performance.now();  // the benchmark's first paint
      this.painted = true;
    }
    url_for(extra) {
      const p = new URLSearchParams(extra);
      return `${this.url}&${p.toString()}`;
    }
    // Fetch what the chart shows now (the zoom window, or everything) and draw it keeping scales.
    async refresh() {
      if (this.busy) return this.busy;
      this.busy = (async () => {
        try {
          const q = { px: String(this.width) };
          if (this.zoom) { q.x0 = String(this.zoom[0]); q.x1 = String(this.zoom[1]); }
          const doc = await M.getJSON(this.url_for(q));
          this.doc = doc;
          const data = this._data(doc);
          if (!this.plot) this._make(data);
          else if (this.zoom) { this.plot.setData(data, false); this.plot.setScale("x", { min: this.zoom[0], max: this.zoom[1] }); }
          else this.plot.setData(data, true);
        } finally { this.busy = null; }
      })();
      return this.busy;
    }
    // New steps were saved: append them without touching the user's zoom.
    async append() {
      const doc = this.doc;
      if (!doc || this.zoom || !doc.raw || doc.points + 50 > this.width) return this.refresh();
      const last = doc.steps.length ? doc.steps[doc.steps.length - 1] : -1;
      const more = await M.getJSON(this.url_for({ after: String(last) }));
      if (!more.steps.length) return;
      for (const k of ["steps", "first", "last", "min", "max"]) doc[k] = doc[k].concat(more[k]);
      doc.nonfinite = mergeRuns(doc.nonfinite, more.nonfinite);
      doc.points += more.points;
      for (const k of ["first_nonfinite_step", "total", "last_step", "ended"]) doc[k] = more[k];
      this.plot.setData(this._data(doc), true);
    }
    setZoom(x0, x1) { this.zoom = x0 === null ? null : [x0, x1]; return this.refresh(); }
    setLog(on) { this.log = on; if (this.plot) { this.plot.destroy(); this.plot = null; } return this.refresh(); }
    setMarkers(m) { this.markers = m; if (this.plot) this.plot.redraw(false); }
  }
  function mergeRuns(a, b) {
    if (!a.length || !b.length) return a.concat(b);
    const last = a[a.length - 1], first = b[0];
    if (last[2] === first[2]) return a.slice(0, -1).concat([[last[0], first[1], last[2], last[3] + first[3]]], b.slice(1));
    return a.concat(b);
  }
  M.Chart = Chart;

  // A layers x steps heatmap on a canvas: log colour, each row scaled to its own range; non-finite
  // cells red. Pixels are written into one ImageData (100k cells in a few ms; fillRect per cell
  // costs ~100x more with software rendering).
  const hsl = (h, sat, l) => {  // CSS hsl() to [r, g, b], 0-255
    const a = sat * Math.min(l, 1 - l), f = (n) => { const k = (n + h / 30) % 12; return l - a * Math.max(-1, Math.min(k - 3, 9 - k, 1)); };
    return [Math.round(255 * f(0)), Math.round(255 * f(8)), Math.round(255 * f(4))];
  };
  const PALETTE = Array.from({ length: 256 }, (_, k) => hsl(220 - 180 * k / 255, 0.7, (85 - 45 * k / 255) / 100));
  M.heatmap = (canvas, doc) => {
    const rows = doc.rows.length, cols = doc.steps.length, ctx = canvas.getContext("2d");
    canvas.height = Math.max(20, Math.min(600, rows * 12));
    const W = canvas.width, H = canvas.height;
    ctx.clearRect(0, 0, W, H);
    if (!rows || !cols) return;
    const img = ctx.createImageData(W, H), px = img.data;
    const colOf = new Int32Array(W);
    for (let x = 0; x < W; x++) colOf[x] = Math.min(cols - 1, Math.floor(x * cols / W));
    for (let i = 0; i < rows; i++) {
      const row = doc.values[i], rgb = new Array(cols);
      let lo = Infinity, hi = -Infinity;
      const logs = row.map((v) => { const n = M.num(v); if (n !== null && Number.isFinite(n) && n > 0) { const l = Math.log10(n); if (l < lo) lo = l; if (l > hi) hi = l; return l; } return null; });
      const span = hi - lo || 1;
      for (let j = 0; j < cols; j++) {
        const n = M.num(row[j]);
        if (n === null) rgb[j] = null;
        else if (!Number.isFinite(n)) rgb[j] = [221, 0, 0];
        else rgb[j] = PALETTE[logs[j] === null ? 0 : Math.round(255 * (logs[j] - lo) / span)];
      }
      const y0 = Math.floor(i * H / rows), y1 = Math.max(y0 + 1, Math.floor((i + 1) * H / rows));
      for (let y = y0; y < y1 && y < H; y++) {
        let o = y * W * 4;
        for (let x = 0; x < W; x++, o += 4) {
          const c = rgb[colOf[x]];
          if (c === null) continue;
          px[o] = c[0]; px[o + 1] = c[1]; px[o + 2] = c[2]; px[o + 3] = 255;
        }
      }
    }
    ctx.putImageData(img, 0, 0);
  };
  // A histogram over steps (steps x bins, colour = count), NaN/Inf steps marked in red at the top.
  M.histogram = (canvas, doc) => {
    const ctx = canvas.getContext("2d"), steps = doc.steps.length;
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    if (!steps) return;
    const bins = doc.edges.length - 1, cw = canvas.width / steps, bh = (canvas.height - 8) / bins;
    const peak = Math.max(1, ...doc.counts.map((c) => Math.max(...c)));
    doc.counts.forEach((col, i) => {
      col.forEach((c, b) => {
        if (!c) return;
        ctx.fillStyle = `rgba(37,99,235,${0.15 + 0.85 * c / peak})`;
        ctx.fillRect(i * cw, canvas.height - (b + 1) * bh, Math.ceil(cw), Math.ceil(bh));
      });
      if (doc.nan[i] || doc.inf[i]) { ctx.fillStyle = "#d00"; ctx.fillRect(i * cw, 0, Math.ceil(cw), 6); }
    });
  };
  window.Murphy = M;
})();
