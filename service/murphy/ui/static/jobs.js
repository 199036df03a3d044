// The Jobs page: rows from /v1/ui/jobs, kept live over one SSE stream; filters restart the stream.
"use strict";
(function () {
  const M = window.Murphy, body = document.getElementById("job-rows");
  const name = document.getElementById("f-name"), status = document.getElementById("f-status");
  let es = null;
  function render(doc) {
    if (!doc.jobs.length) { body.innerHTML = '<tr><td colspan="6" class="muted">no training jobs</td></tr>'; return; }
    body.innerHTML = doc.jobs.map((j) => `<tr data-job="${M.esc(j.name)}">
      <td><a href="/ui/jobs/${encodeURIComponent(j.name)}">${M.esc(j.name)}</a></td>
      <td class="status">${M.badge(j.status)}</td><td>${M.esc(j.secondary)}</td>
      <td>${M.duration(j.duration)}</td><td>${M.esc(j.instance_type || "")} × ${M.esc(j.instance_count || "")}</td>
      <td class="rules">${j.rules.map((r) => `<span class="badge b-${M.esc(r.status)}" data-rule="${M.esc(r.name)}"
        title="${M.esc(r.status)}">${M.esc(r.name)}: ${M.esc(r.status)}${r.step !== null && r.step !== undefined ? " @ " + r.step : ""}</span>`).join(" ")}</td></tr>`).join("");
  }
  function connect() {
    if (es) es.close();
    const q = new URLSearchParams();
    if (name.value) q.set("name", name.value);
    if (status.value) q.set("status", status.value);
    es = M.live(`/v1/ui/jobs/live?${q}`, { jobs: render });
  }
  let timer = null;
  name.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(connect, 250); });
  status.addEventListener("change", connect);
  document.getElementById("filters").addEventListener("submit", (e) => e.preventDefault());
  connect();
})();
