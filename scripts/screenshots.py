"""Screenshots of the main pages in headless Chromium, as finance, a team lead and a viewer,
on a running site holding the demo (issue 29: what each role meets; look at every picture).

    .venv/bin/python manage.py collectstatic --noinput   # DEBUG off: no CSS without it
    .venv/bin/python manage.py runserver 127.0.0.1:8768 --noreload &   # on the demo database
    .venv/bin/python scripts/screenshots.py --base http://127.0.0.1:8768 --month 2026-10

One PNG per page and role under var/screenshots/ (gitignored), full page height. Uses Debian's
chromium and chromium-driver (tests/chromium.py drives the same binaries). The passwords are the
demo's public ones unless DEMO_*_PASSWORD say otherwise.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOGINS = {
    "finance": os.environ.get("DEMO_FINANCE_PASSWORD", "finance-demo"),
    "lead": os.environ.get("DEMO_LEAD_PASSWORD", "lead-demo"),
    "viewer": os.environ.get("DEMO_VIEWER_PASSWORD", "viewer-demo"),
}


def pages(month: str, team: str, tag_key: str, run: str) -> list[tuple[str, str]]:
    """(file stem, path) of each main page."""
    return [
        ("overview", f"/?month={month}"),
        ("team", f"/teams/{team}/?month={month}"),
        ("runs", f"/runs/?month={month}"),
        ("run", f"/runs/{team}/{run}/?month={month}"),
        ("explorer-team", f"/explorer/?month={month}&group_by=team"),
        ("explorer-region", f"/explorer/?month={month}&group_by=region"),
        ("explorer-tag", f"/explorer/?month={month}&group_by=tag:{tag_key}"),
        ("budgets", "/budgets/"),
        ("reconciliation", f"/reconciliation/?month={month}"),
        ("statement", f"/teams/{team}/statements/{month}/"),
        ("close", f"/close/{month}/"),
        ("pricing", f"/pricing/?month={month}"),
        ("imports", "/imports/"),
        ("anomalies", "/anomalies/?status=open"),
        ("endpoints", f"/endpoints/?month={month}"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="http://127.0.0.1:8768")
    parser.add_argument("--month", required=True, help="YYYY-MM")
    parser.add_argument("--team", default="language", help="a team the demo lead leads")
    parser.add_argument("--tag-key", default="project")
    parser.add_argument("--run", default="llama-pretrain-70b-r1002", help="a run id of --team")
    parser.add_argument("--roles", default="finance,lead,viewer")
    parser.add_argument("--only", default="", help="comma-separated page stems")
    parser.add_argument("--out", default=str(ROOT / "var" / "screenshots"))
    args = parser.parse_args()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    only = {s for s in args.only.split(",") if s}
    for role in args.roles.split(","):
        profile = tempfile.mkdtemp(prefix="finops-shots-")
        options = webdriver.ChromeOptions()
        options.binary_location = "/usr/bin/chromium"
        for arg in (
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--no-first-run", "--hide-scrollbars", "--window-size=1400,1000",
            f"--user-data-dir={profile}",
        ):  # fmt: skip
            options.add_argument(arg)
        driver = webdriver.Chrome(
            options=options, service=Service(executable_path="/usr/bin/chromedriver")
        )
        driver.set_page_load_timeout(120)
        try:
            driver.get(args.base + "/accounts/login/")
            driver.find_element(By.ID, "id_username").send_keys(role)
            driver.find_element(By.ID, "id_password").send_keys(LOGINS[role])
            driver.find_element(By.ID, "login-submit").click()
            time.sleep(1)
            for stem, path in pages(args.month, args.team, args.tag_key, args.run):
                if only and stem not in only:
                    continue
                began = time.monotonic()
                driver.get(args.base + path)
                time.sleep(1.5)  # charts animate in
                height = driver.execute_script("return document.documentElement.scrollHeight")
                driver.set_window_size(1400, min(max(int(height), 1000), 12000))
                target = out / f"{stem}-{role}.png"
                driver.save_screenshot(str(target))
                driver.set_window_size(1400, 1000)
                print(f"{target.name}: {time.monotonic() - began:.1f} s, {height} px")
        finally:
            driver.quit()
            shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    main()
