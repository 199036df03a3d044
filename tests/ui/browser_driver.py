"""Drives Debian's chromium through Playwright (run by the browser venv's python, see
infra/ci/browser_venv.sh): ``python browser_driver.py <endpoint> <artifacts-dir> <scenario>``.

It talks to the test over stdin/stdout, one JSON object per line: it prints ``{"ready": ...}``
when it wants the test to act (e.g. create a job), waits for a line on stdin, and prints the
facts it observed as the last line. The test asserts on those facts; the driver only looks.
Never ``playwright install``: the browser is the system's (executable_path).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from playwright.sync_api import Page, sync_playwright

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]

# Counts the pixels of a canvas close to a colour (the non-finite rail and first-NaN line are red).
RED_PIXELS = """(sel) => {
  const c = document.querySelector(sel); if (!c) return -1;
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; let n = 0, ink = 0;
  for (let i = 0; i < d.length; i += 4) {
    if (d[i+3] > 0) ink++;
    if (d[i] > 180 && d[i+1] < 60 && d[i+2] < 60 && d[i+3] > 200) n++;
  }
  return {red: n, ink: ink, width: c.width, height: c.height};
}"""


def say(doc: dict[str, Any]) -> None:
    print(json.dumps(doc), flush=True)


def wait_go() -> None:
    sys.stdin.readline()


def watch_errors(page: Page, errors: list[str]) -> None:
    page.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
    page.on("console", lambda m: errors.append(f"console.{m.type}: {m.text}") if m.type in ("error", "warning") else None)
    page.on("requestfailed", lambda r: errors.append(f"requestfailed: {r.url} {r.failure}")
            if "/live" not in r.url else None)  # a stream cut when the page closes is not an error
    page.on("response", lambda r: errors.append(f"http {r.status}: {r.url}") if r.status >= 400 else None)


def seed(page: Page, endpoint: str, out: Path, job: str, errors: list[str]) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    page.goto(f"{endpoint}/ui/")
    page.wait_for_selector("#job-rows")
    # Record every rule badge text the row shows, and a marker that a reload would erase.
    page.evaluate("""(job) => {
      window.__noReload = true; window.__ruleTexts = [];
      new MutationObserver(() => {
        const b = document.querySelector(`tr[data-job="${job}"] .rules .badge`);
        if (b && window.__ruleTexts[window.__ruleTexts.length - 1] !== b.textContent) window.__ruleTexts.push(b.textContent);
      }).observe(document.getElementById('job-rows'), {childList: true, subtree: true, characterData: true});
    }""", job)
    say({"ready": "jobs page open"})
    wait_go()
    page.wait_for_selector(f'tr[data-job="{job}"] .rules .badge.b-IssuesFound', timeout=120_000)
    facts["jobs_rule_texts"] = page.evaluate("window.__ruleTexts")
    facts["jobs_no_reload"] = page.evaluate("window.__noReload === true")
    facts["jobs_row"] = page.inner_text(f'tr[data-job="{job}"]')
    page.wait_for_selector(f'tr[data-job="{job}"] .status .b-Stopped', timeout=60_000)
    page.screenshot(path=str(out / "jobs.png"), full_page=True)

    page.goto(f"{endpoint}/ui/jobs/{job}")
    page.wait_for_selector("#rule-rows tr .b-IssuesFound", timeout=30_000)
    facts["rule_row"] = page.inner_text("#rule-rows tr")
    facts["fired_step"] = page.inner_text("#rule-rows tr .fired-step")
    page.wait_for_selector("#nonfinite-rows tr .tensor", timeout=30_000)
    facts["nonfinite_rows"] = page.eval_on_selector_all(
        "#nonfinite-rows tr", "rows => rows.map(r => [r.querySelector('.step').textContent, r.querySelector('.tensor').textContent])")
    loss = '.chart[data-tensor="MSELoss_output_0"] canvas'
    page.wait_for_selector(loss, timeout=30_000)
    page.wait_for_function("() => { const c = window.murphyPage.charts.get('MSELoss_output_0'); return c && c.painted; }",
                           timeout=30_000)
    facts["loss_pixels"] = page.evaluate(RED_PIXELS, loss)
    page.wait_for_selector("#inspector-rows tr", timeout=30_000)
    facts["inspector_rows"] = page.eval_on_selector_all("#inspector-rows tr", "rows => rows.length")
    facts["heatmap_pixels"] = page.evaluate(RED_PIXELS, "#heatmap")
    page.screenshot(path=str(out / "job-top.png"), full_page=False)
    page.screenshot(path=str(out / "job.png"), full_page=True)
    page.click('#rule-rows tr.clickable')  # a finding moves every chart to its step
    page.wait_for_function("() => window.murphyPage.zoom !== null")
    facts["zoom_after_finding"] = page.evaluate("window.murphyPage.zoom")
    # The selected tensor's reductions: another one replaces the l2 norm, in the same window.
    page.select_option("#t-stat", "nan_count")
    page.wait_for_function("() => { const r = window.murphyPage.reductions; "
                           "return r && r.url.includes('stat=nan_count') && r.doc && r.painted; }", timeout=30_000)
    facts["reduction"] = page.evaluate("(() => { const r = window.murphyPage.reductions; "
                                       "return {title: r.title, steps: r.doc.steps, last: r.doc.last}; })()")
    page.select_option("#t-stat", "l2")
    page.wait_for_function("() => window.murphyPage.reductions.url.includes('stat=l2') && window.murphyPage.reductions.painted")
    page.locator("#s-tensors").scroll_into_view_if_needed()
    page.screenshot(path=str(out / "tensors.png"), full_page=False)
    return facts


def live_zoom(page: Page, endpoint: str, out: Path, job: str) -> dict[str, Any]:
    """A running job: zoom the loss chart by dragging, let steps arrive, check the zoom held."""
    facts: dict[str, Any] = {}
    say({"ready": "driver up"})
    wait_go()
    page.goto(f"{endpoint}/ui/jobs/{job}")
    name = "MSELoss_output_0"
    page.wait_for_function(f"() => {{ const c = window.murphyPage.charts.get('{name}'); return c && c.doc && c.doc.total >= 8; }}",
                           timeout=90_000)
    over = page.locator(f'.chart[data-tensor="{name}"] .u-over')
    box = over.bounding_box()
    assert box is not None
    total_before = page.evaluate(f"window.murphyPage.charts.get('{name}').doc.total")
    # drag across the left part of the plot: steps ~[1, 4]
    page.mouse.move(box["x"] + box["width"] * 0.1, box["y"] + box["height"] / 2)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.4, box["y"] + box["height"] / 2, steps=5)
    page.mouse.up()
    page.wait_for_function("() => window.murphyPage.zoom !== null", timeout=10_000)
    zoom = page.evaluate("window.murphyPage.zoom")
    appends = page.evaluate("window.murphyPage.appends || 0")
    page.wait_for_function(f"() => (window.murphyPage.appends || 0) >= {appends + 3}", timeout=60_000)
    time.sleep(0.5)
    facts.update(
        zoom=zoom, total_before=total_before,
        total_after=page.evaluate(f"window.murphyPage.charts.get('{name}').doc.total"),
        scale=page.evaluate(f"(() => {{ const s = window.murphyPage.charts.get('{name}').plot.scales.x; return [s.min, s.max]; }})()"),
        zoom_after=page.evaluate("window.murphyPage.zoom"),
        window_steps=page.evaluate(f"window.murphyPage.charts.get('{name}').doc.steps"),
    )
    page.screenshot(path=str(out / "scalars-zoomed.png"), full_page=False)
    return facts


def main() -> None:
    endpoint, out, scenario, job = sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4]
    out.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        watch_errors(page, errors)
        try:
            facts = seed(page, endpoint, out, job, errors) if scenario == "seed" else live_zoom(page, endpoint, out, job)
        except Exception as e:  # report what was seen so far with the failure
            page.screenshot(path=str(out / f"failure-{scenario}.png"), full_page=True)
            facts = {"failure": f"{type(e).__name__}: {e}"}
        facts["errors"] = errors
        browser.close()
    say(facts)


if __name__ == "__main__":
    main()
