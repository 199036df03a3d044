"""Drives Debian's chromium through Playwright against ``murphy server --auth sigv4`` (run by the
browser venv's python): ``python login_driver.py <endpoint> <artifacts-dir> <akid> <secret>``.

The account's own job is ``alices``; ``bobs`` belongs to another account. It logs in with a wrong
secret, then the right one, looks at the jobs list and the other account's URLs, calls Stop
without and with the CSRF token, and logs out. It prints the facts it observed as one JSON line;
the test asserts on them. Never ``playwright install``: the browser is the system's.
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
FETCH = """async ([url, method]) => {
  const r = await fetch(url, { method, headers: { Accept: "application/json" } });
  return [r.status, await r.text()];
}"""


def log_in(page: Page, akid: str, secret: str) -> None:
    page.fill("#access_key_id", akid)
    page.fill("#secret", secret)
    page.click("#login-submit")
    page.wait_for_load_state("load")


def scenario(page: Page, endpoint: str, out: Path, akid: str, secret: str) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    page.goto(f"{endpoint}/ui/jobs/alices")
    facts["unauthenticated_url"] = page.url
    log_in(page, akid, "x" * 40)
    facts["wrong_secret_url"] = page.url
    facts["wrong_secret_error"] = page.text_content("#login-error")
    page.screenshot(path=str(out / "login-error.png"))
    log_in(page, akid, secret)
    facts["after_login_url"] = page.url  # back where the first request wanted to go
    facts["cookie_flags"] = {c["name"]: [c["httpOnly"], c["sameSite"]] for c in page.context.cookies()}
    page.goto(f"{endpoint}/ui/")
    page.wait_for_selector('tr[data-job="alices"]', timeout=20_000)
    time.sleep(1.0)  # a live update could still add rows: look after it
    facts["listed"] = page.eval_on_selector_all("tr[data-job]", "rows => rows.map(r => r.dataset.job)")
    facts["logout_visible"] = page.is_visible("#logout")
    page.screenshot(path=str(out / "jobs-logged-in.png"))
    for job in ("bobs", "no-such-job"):
        facts[f"dashboard_{job}"] = page.evaluate(FETCH, [f"/v1/training-jobs/{job}/dashboard", "GET"])
    facts["dashboard_alices"] = page.evaluate(FETCH, ["/v1/training-jobs/alices/dashboard", "GET"])[0]
    facts["stop_without_csrf"] = page.evaluate(FETCH, ["/v1/training-jobs/alices/stop", "POST"])
    page.goto(f"{endpoint}/ui/jobs/alices")
    page.wait_for_selector("#stop")
    with page.expect_response(lambda r: r.url.endswith("/v1/training-jobs/alices/stop")) as stopped:
        page.click("#stop")
    facts["stop_button_status"] = stopped.value.status
    page.click("#logout")
    page.wait_for_url("**/ui/login", timeout=10_000)
    facts["after_logout_api"] = page.evaluate(FETCH, ["/v1/ui/jobs", "GET"])
    page.goto(f"{endpoint}/ui/")
    facts["after_logout_url"] = page.url
    return facts


def main() -> None:
    endpoint, out, akid, secret = sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4]
    out.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        # Script errors only: the refusals this scenario provokes (401, 403) are expected answers.
        page.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
        try:
            facts = scenario(page, endpoint, out, akid, secret)
        except Exception as e:  # report what was seen so far with the failure
            page.screenshot(path=str(out / "failure-login.png"), full_page=True)
            facts = {"failure": f"{type(e).__name__}: {e}"}
        facts["errors"] = errors
        browser.close()
    print(json.dumps(facts), flush=True)


if __name__ == "__main__":
    main()
