// The Job page: header, timeline, rules, scalars, non-finite table, tensors. One SSE stream
// (/v1/training-jobs/<name>/live) drives it: "job" re-renders the header and rules, "steps"
// appends to the charts without touching the zoom or the selection.
"use strict";
(function () {
  const M = window.Murphy, $ = (id) => document.getElementById(id);
  const job = $("app").dataset.job, api = `/v1/training-jobs/${encodeURIComponent(job)}`;
  const charts = new Map();  // tensor -> Chart (scalars)
  const state = { markers: [], zoom: null, log: false, selected: null, stat: "l2", tensorCount: -1,
    logCursor: 0, terminal: false, lastStep: null, inspect: null };
  window.murphyPage = state;  // tests and people in the console read it
  state.charts = charts;

  // ---- header, timeline, rules -----------------------------------------------------------------
  function renderJob(doc) {
    const d = doc.job;
    $("job-status").outerHTML = `<span id="job-status" class="badge b-${M.esc(d.TrainingJobStatus)}">${M.esc(d.TrainingJobStatus)}</span>`;
    $("job-secondary").textContent = d.SecondaryStatus;
    $("stop-reason").textContent = doc.stop_reason ? `Stop reason: ${doc.stop_reason}` : "";
    $("failure-reason").textContent = d.FailureReason ? `Failure reason: ${d.FailureReason}` : "";
    $("stop").disabled = doc.terminal || d.TrainingJobStatus === "Stopping";
    $("timeline").innerHTML = (d.SecondaryStatusTransitions || []).map((t) =>
      `<li><b>${M.esc(t.Status)}</b> <span class="muted">${new Date(t.StartTime * 1000).toLocaleTimeString()}</span> ${M.esc(t.StatusMessage)}</li>`).join("");
    $("hyper").innerHTML = Object.entries(d.HyperParameters || {}).map(([k, v]) => `<tr><th>${M.esc(k)}</th><td>${M.esc(v)}</td></tr>`).join("");
    $("rule-rows").innerHTML = doc.rules.map((r) => `<tr class="${r.step !== null ? "clickable" : ""}" data-rule="${M.esc(r.name)}" data-step="${r.step === null ? "" : r.step}">
      <td>${M.esc(r.name)}</td><td class="status">${M.badge(r.status)}</td>
      <td class="fired-step">${r.step === null ? "" : r.step}</td><td class="tensor">${M.esc(r.tensor || "")}</td>
      <td>${M.esc(r.value === null ? "" : M.fmt(r.value))}</td>
      <td class="small">${Object.entries(r.parameters).map(([k, v]) => `${M.esc(k)}=${M.esc(v)}`).join("<br>")}</td>
      <td>${r.evaluated_step === null || r.evaluated_step === undefined ? "" : r.evaluated_step}</td><td>${r.lag === null ? "" : r.lag}</td></tr>`).join("");
    state.markers = doc.markers; state.terminal = doc.terminal;
    for (const c of charts.values()) c.setMarkers(doc.markers);
  }
  $("rule-rows").addEventListener("click", (e) => {
    const tr = e.target.closest("tr");
    if (tr && tr.dataset.step !== "") moveAll(Number(tr.dataset.step));
  });
  $("stop").addEventListener("click", async () => {
    $("stop").disabled = true;
    const r = await M.post(`${api}/stop`);
    if (!r.ok) { $("stop").disabled = false; console.warn("stop failed", r.status); }
  });

  // ---- scalars ---------------------------------------------------------------------------------
  function scalarNames(doc) {
    const picked = [];
    for (const c of ["losses", "metrics", "scalars"]) for (const n of doc.collections[c] || []) if (!picked.includes(n)) picked.push(n);
    if (!picked.length) for (const n of doc.tensors) if (/loss/i.test(n)) picked.push(n);
    return picked;
  }
  function chartFor(name, stat, el, title) {
    return new M.Chart(el, { url: `${api}/series?tensor=${encodeURIComponent(name)}&stat=${stat}`, title,
      log: state.log, markers: state.markers, onZoom: (a, b) => zoomAll(a, b) });
  }
  function ensureCharts(names) {
    for (const n of names) {
      if (charts.has(n)) continue;
      const box = document.createElement("div");
      box.className = "chart"; box.dataset.tensor = n;
      $("charts").appendChild(box);
      const c = chartFor(n, "value", box, n);
      c.zoom = state.zoom;
      charts.set(n, c);
      c.refresh();
    }
  }
  function allCharts() { return [...charts.values(), ...(state.reductions ? [state.reductions] : [])]; }
  function zoomAll(x0, x1) { state.zoom = x0 === null ? null : [x0, x1]; return Promise.all(allCharts().map((c) => c.setZoom(x0, x1))); }
  function moveAll(step) {
    const w = Math.max(5, Math.round((state.lastStep || 0) * 0.02));
    zoomAll(Math.max(0, step - w), step + w);
    showStep(step);
    $("s-scalars").scrollIntoView({ block: "start" });
  }
  state.moveAll = moveAll;
  $("reset-zoom").addEventListener("click", () => zoomAll(null, null));
  $("logscale").addEventListener("change", (e) => { state.log = e.target.checked; allCharts().forEach((c) => c.setLog(state.log)); });

  // ---- non-finite ------------------------------------------------------------------------------
  async function refreshNonfinite() {
    const doc = await M.getJSON(`${api}/nonfinite`);
    $("nonfinite-rows").innerHTML = doc.rows.length ? doc.rows.map((r) => `<tr class="clickable" data-step="${r.step}">
      <td class="step">${r.step}</td><td class="tensor">${M.esc(r.tensor)}</td><td>${M.fmt(r.nan_count)}</td><td>${M.fmt(r.inf_count)}</td></tr>`).join("")
      : '<tr><td colspan="4" class="muted">none so far</td></tr>';
  }
  $("nonfinite-rows").addEventListener("click", (e) => { const tr = e.target.closest("tr"); if (tr && tr.dataset.step) moveAll(Number(tr.dataset.step)); });

  // ---- tensors ---------------------------------------------------------------------------------
  let tensorsDoc = null;
  async function refreshTensors() {
    const q = new URLSearchParams();
    if ($("t-regex").value) q.set("regex", $("t-regex").value);
    if ($("t-collection").value) q.set("collection", $("t-collection").value);
    let doc;
    try { doc = await M.getJSON(`${api}/tensors?${q}`); } catch (e) { $("t-count").textContent = e.message; return; }
    tensorsDoc = doc; state.lastStep = doc.last_step;
    const sel = $("t-collection"), have = [...sel.options].map((o) => o.value);
    for (const c of Object.keys(doc.collections)) if (!have.includes(c)) sel.add(new Option(c, c));
    $("t-count").textContent = `${doc.tensors.length} tensors, ${doc.steps} steps`;
    $("tensor-list").innerHTML = doc.tensors.map((n) => `<li data-tensor="${M.esc(n)}" class="${n === state.selected ? "sel" : ""}">${M.esc(n)}</li>`).join("");
    if (!q.toString()) ensureCharts(scalarNames(doc));
    if (!state.selected && doc.tensors.length) select(doc.tensors[0]);
  }
  $("t-regex").addEventListener("input", () => refreshTensors());
  $("t-collection").addEventListener("change", () => refreshTensors());
  $("tensor-list").addEventListener("click", (e) => { const li = e.target.closest("li"); if (li) select(li.dataset.tensor); });
  $("t-stat").addEventListener("change", (e) => { state.stat = e.target.value; if (state.selected) select(state.selected); });
  function select(name) {
    state.selected = name;
    const stat = state.stat;
    $("t-selected").textContent = `${name} (${stat} over steps)`;
    for (const li of $("tensor-list").children) li.classList.toggle("sel", li.dataset.tensor === name);
    const el = $("reductions-chart");
    el.innerHTML = "";
    state.reductions = chartFor(name, stat, el, `${name}: ${stat}`);
    state.reductions.zoom = state.zoom;
    state.reductions.refresh();
    refreshHistogram();
  }
  async function refreshHistogram() {
    if (!state.selected) return;
    M.histogram($("histogram"), await M.getJSON(`${api}/histogram?tensor=${encodeURIComponent(state.selected)}&bins=40&px=200`));
  }
  async function refreshHeatmap() {
    const doc = await M.getJSON(`${api}/heatmap?regex=grad&px=${$("heatmap").width}`);
    M.heatmap($("heatmap"), doc);
    if (doc.rows.length && state.heatmapAt === undefined) state.heatmapAt = performance.now();
    $("heatmap-rows").textContent = doc.rows.length ? doc.rows.join(" · ") : "no gradients saved";
  }
  async function showStep(step) {
    state.inspect = step; $("inspect-step").value = step;
    const doc = await M.getJSON(`${api}/steps/${step}`);
    $("inspector-rows").innerHTML = doc.tensors.map((t) => `<tr data-tensor="${M.esc(t.tensor)}"><td>${M.esc(t.tensor)}</td>
      <td>${M.esc(JSON.stringify(t.shape))}</td><td>${M.esc(t.dtype)}</td><td>${M.fmt(t.min)}</td><td>${M.fmt(t.max)}</td>
      <td>${M.fmt(t.mean)}</td><td>${M.fmt(t.l2)}</td><td>${M.fmt(t.nan_count)}</td><td>${M.fmt(t.inf_count)}</td>
      <td>${t.delta_l2 === null ? "" : M.fmt(t.delta_l2)}</td>
      <td><a href="${api}/npy?tensor=${encodeURIComponent(t.tensor)}&step=${step}">.npy</a></td></tr>`).join("");
  }
  $("inspect-step").addEventListener("change", (e) => showStep(Number(e.target.value)));

  // ---- logs ------------------------------------------------------------------------------------
  async function refreshLogs() {
    const doc = await M.getJSON(`${api}/logs?cursor=${state.logCursor}`);
    if (doc.lines.length) {
      const pre = $("log-lines"), stick = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
      pre.textContent += doc.lines.join("\n") + "\n";
      if (stick) pre.scrollTop = pre.scrollHeight;
    }
    state.logCursor = doc.cursor;
  }

  // ---- live ------------------------------------------------------------------------------------
  const quiet = (p) => p.catch((e) => console.warn(e.message));
  async function onSteps(msg) {
    await quiet(initial);
    if (msg.last_step === state.lastStep) return;  // the first load already showed these steps
    state.lastStep = msg.last_step;
    state.appends = (state.appends || 0) + 1;
    await quiet(refreshTensors());
    await Promise.all([...allCharts().map((c) => quiet(c.append())), quiet(refreshNonfinite()), quiet(refreshHeatmap()),
      quiet(refreshHistogram())]);
    if (state.inspect === null && msg.last_step !== null) quiet(showStep(msg.last_step));
  }
  // The charts first (they need the tensor list), then the tables, the heatmap and the inspector.
  const initial = quiet(refreshTensors().then(() => Promise.all([refreshNonfinite(), refreshHeatmap(),
    state.lastStep === null || state.lastStep === undefined ? null : showStep(state.lastStep)])));
  M.live(`${api}/live`, {
    job: (doc) => { renderJob(doc); quiet(refreshLogs()); },
    steps: (msg) => { state.pending = onSteps(msg); },
  });
})();
