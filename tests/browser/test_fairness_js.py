"""The page's deck check (fairness.js, WebCrypto) agrees with ``events.fairness`` on a real
deal, and fails on a tampered seed or a card that is not where the seed put it."""

from __future__ import annotations

import time
from typing import Any

from selenium.webdriver.remote.webdriver import WebDriver

from events.fairness import derive_deal, parse_seed
from tests.browser.harness import chromium, http, wait_for

DOCS_SEED = bytes(range(32)).hex()  # docs/fairness.md, "Worked example"


def run_module(driver: WebDriver, call: str, *args: Any) -> Any:
    """Run ``call`` (a JS expression over ``m``, the module, and ``args``) and return its value."""
    script = (
        "const done = arguments[arguments.length - 1];"
        "const args = Array.from(arguments).slice(0, -1);"
        "import('/web/fairness.js').then(m => (" + call + "))"
        ".then(done, e => done({error: String(e)}));"
    )
    return driver.execute_async_script(script, *args)


def finished_deal(base: str) -> dict[str, Any]:
    """A bot-against-bot table played to its end: its deal's public record."""
    table = http("POST", f"{base}/tables", {"bots": {"0": "greedy", "1": "random"}})["table_id"]
    deadline = time.monotonic() + 60
    while http("GET", f"{base}/tables/{table}")["status"] != "over":
        assert time.monotonic() < deadline, "the bots did not finish"
        time.sleep(0.3)
    events = [e["payload"] for e in http("GET", f"{base}/tables/{table}/events")["events"]]
    started = next(p for p in events if p["type"] == "deal_started")
    revealed = next(p for p in events if p["type"] == "deal_revealed")
    turned = [p["card"] for p in events if p["type"] == "card_turned"]
    return {
        "tableId": table,
        "number": 1,
        "dealer": started["dealer"],
        "commitment": started["commitment"],
        "seed": revealed["seed"],
        "turned": turned,
    }


def test_the_page_derives_the_same_deal_as_python_and_rejects_tampering(service: str) -> None:
    deal = finished_deal(service)
    driver = chromium()
    try:
        driver.get(service + "/")
        wait_for(lambda: driver.execute_script("return document.readyState") == "complete")
        context = f"{deal['tableId']}/1"
        expected = derive_deal(parse_seed(deal["seed"]), context)
        derived = run_module(driver, "m.deriveDeal(args[0], args[1])", deal["seed"], context)
        assert derived["deck"] == expected["deck"]
        assert derived["commitment"] == expected["commitment"] == deal["commitment"]
        assert derived["nonDealer"] == expected["non_dealer"]
        assert derived["dealer"] == expected["dealer"]
        example = run_module(driver, "m.deckOrder(args[0], 'T-example/1')", DOCS_SEED)
        assert example == derive_deal(bytes(range(32)), "T-example/1")["deck"]

        verdict = run_module(driver, "m.verifyDeal(args[0])", deal)
        assert verdict["ok"] is True and len(verdict["checks"]) == 2, verdict

        digit = "0" if deal["seed"][0] != "0" else "1"
        tampered = {**deal, "seed": digit + deal["seed"][1:]}
        verdict = run_module(driver, "m.verifyDeal(args[0])", tampered)
        assert verdict["ok"] is False and verdict["checks"][0]["ok"] is False, verdict

        swapped = {**deal, "turned": deal["turned"][1::-1] + deal["turned"][2:]}
        verdict = run_module(driver, "m.verifyDeal(args[0])", swapped)
        assert verdict["ok"] is False and verdict["checks"][0]["ok"] is True, verdict
    finally:
        driver.quit()
