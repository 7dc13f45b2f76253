"""Web page benchmark: what a player waits for in real Chromium, against ``conquian serve``.

    .venv/bin/python bench/web_page.py [--url redis://127.0.0.1:6379/9] [--moves 30] [--loads 10]

The figures it takes (load, move, bytes): ``docs/performance.md`` ("Web page", "Module notes").
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from selenium.webdriver.common.by import By

from services.gateway.web_pages import FOLDER
from tests.browser.harness import (
    chromium,
    click,
    legal,
    my_turn,
    serve,
    table_state,
    wait_for,
)


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return {
        "n": len(ordered),
        "median_ms": round(statistics.median(ordered), 1),
        "p90_ms": round(p90, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/9"))
    parser.add_argument("--moves", type=int, default=30)
    parser.add_argument("--loads", type=int, default=10)
    args = parser.parse_args()
    load_before = os.getloadavg()
    loads: list[float] = []
    moves: list[float] = []
    with serve(args.url) as base:
        driver = chromium()
        try:
            while len(moves) < args.moves:
                driver.get(base + "/")
                wait_for(lambda: driver.find_element(By.ID, "create"))
                driver.find_element(By.CSS_SELECTOR, "select[name=clock] option[value='']").click()
                click(driver, "#create")
                wait_for(lambda: table_state(driver).get("phase") not in (None, "none"))
                table = table_state(driver)["table"]
                while len(moves) < args.moves:
                    wait_for(lambda: my_turn(driver) or table_state(driver).get("phase") == "over")
                    if table_state(driver).get("phase") == "over":
                        break
                    simple = [a for a in ("turn", "refuse", "leave", "waive") if a in legal(driver)]
                    if not simple:  # a forced take: not a one-click move, leave the table
                        break
                    before = int(table_state(driver)["version"])
                    button = driver.find_element(By.CSS_SELECTOR, f'[data-action="{simple[0]}"]')
                    started = time.perf_counter()
                    button.click()
                    wait_for(lambda b=before: int(table_state(driver)["version"]) > b, 30)
                    moves.append(1000 * (time.perf_counter() - started))
            for _ in range(args.loads):
                driver.get("about:blank")
                started = time.perf_counter()
                driver.get(f"{base}/#/t/{table}")
                wait_for(lambda: "live" in driver.find_element(By.ID, "conn").text, 30)
                loads.append(1000 * (time.perf_counter() - started))
        finally:
            driver.quit()
    size = sum(p.stat().st_size for p in FOLDER.iterdir() if not p.name.endswith(".d.ts"))
    figures = {
        "move": summary(moves),
        "load": summary(loads),
        "bytes": size,
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
    }
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
