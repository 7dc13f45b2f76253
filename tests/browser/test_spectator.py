"""A spectator's page never holds a hidden card: not in its DOM, not in any HTTP answer or
WebSocket message it received (Chrome's performance log gives the traffic)."""

from __future__ import annotations

import json
import re
from typing import Any

from selenium.webdriver.remote.webdriver import WebDriver

from tests.browser.harness import (
    chromium,
    click,
    console_errors,
    http,
    move,
    seated_table,
    table_state,
    wait_for,
)


def hidden_cards(base: str, table: str, tokens: list[str]) -> set[str]:
    """The cards in both hands now: dealt or kept, never shown on the table."""
    cards: set[str] = set()
    for token in tokens:
        view = http("GET", f"{base}/tables/{table}/view", token=token)
        cards.update(view["deal"]["players"][view["seat"]]["hand"])
    assert len(cards) == 20
    return cards


def found(card: str, text: str) -> bool:
    return re.search(rf"(?<![A-Za-z0-9]){card}(?![A-Za-z0-9])", text) is not None


def traffic(driver: WebDriver) -> list[str]:
    """Every JSON answer and WebSocket message the page received (the page's own scripts,
    whose comments give examples of cards, are left out)."""
    out: list[str] = []
    data: set[str] = set()
    for entry in driver.get_log("performance"):
        message: dict[str, Any] = json.loads(entry["message"])["message"]
        params = message.get("params", {})
        if message["method"] == "Network.webSocketFrameReceived":
            out.append(params["response"]["payloadData"])
        elif message["method"] == "Network.responseReceived":
            if params["response"]["mimeType"] == "application/json":
                data.add(params["requestId"])
        elif message["method"] == "Network.loadingFinished" and params["requestId"] in data:
            try:
                body = driver.execute_cdp_cmd(
                    "Network.getResponseBody", {"requestId": params["requestId"]}
                )
            except Exception:  # a request with no body (a preflight, a 204)
                continue
            out.append(body["body"])
    return out


def test_a_spectator_never_receives_or_shows_a_hidden_card(service: str) -> None:
    table, tokens = seated_table(service)
    driver = chromium(network_log=True)
    try:
        driver.get(service + "/")  # a running table is found in the lobby and watched
        click(driver, f'#lobby-running li[data-table="{table}"] button')
        wait_for(lambda: table_state(driver).get("seat") == "spectator", what="the watch page")
        for step in range(8):
            move(service, table, tokens, step)
            version = http("GET", f"{service}/tables/{table}")["version"]
            wait_for(lambda v=version: int(table_state(driver).get("version", 0)) >= v)
            hidden = hidden_cards(service, table, tokens)
            dom = driver.page_source
            assert [c for c in hidden if found(c, dom)] == [], f"step {step}"
        received = traffic(driver)
        frames = [t for t in received if '"kind"' in t]
        assert len(frames) > 8  # the live socket's messages are in the log
        assert any('"tables"' in t for t in received)  # and the HTTP answers (the lobby)
        everything = "\n".join(received)
        assert [c for c in hidden if found(c, everything)] == []
        # the search does see cards: the public ones (turned, refused, wasted) are there
        public = http("GET", f"{service}/tables/{table}/events")["events"]
        shown = {e["payload"]["card"] for e in public if "card" in e["payload"]}
        assert shown and all(found(c, everything) for c in shown)
        assert all(found(c, driver.page_source) for c in shown)
        assert console_errors(driver) == []
    finally:
        driver.quit()
