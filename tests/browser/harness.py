"""Helpers of the browser tests: the service from ``conquian serve``, headless Chromium from
Debian's packages through Selenium and the system chromedriver, and a player that clicks
through the page (docs/web.md, "Tests").  ``tests/browser/screenshots.py`` uses them too."""

from __future__ import annotations

import json
import os
import shutil
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.common.exceptions import (
    NoSuchElementException,
    StaleElementReferenceException,
    WebDriverException,
)
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
HIDING_MOVES = ("turn", "refuse", "leave", "waive")  # moves that show no hand card


def missing_browser() -> str | None:
    """Say what of Debian's chromium and chromium-driver is missing (None: both are there)."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not (Path(p).is_file() or shutil.which(p))]
    return ", ".join(missing) or None


def require_browser() -> None:
    """Skip the calling test when Chromium or its driver is missing, or FAIL it under CI=true."""
    missing = missing_browser()
    if missing is None:
        return
    message = f"headless Chromium is missing ({missing}): apt-get install chromium chromium-driver"
    if os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}:
        pytest.fail(message + " (CI=true: the browser tests never skip)", pytrace=False)
    pytest.skip(message)


def http(
    method: str, url: str, body: dict[str, Any] | None = None, token: str | None = None
) -> Any:
    """One JSON request; returns the decoded answer (raises HTTPError on 4xx/5xx)."""
    data = None if body is None else json.dumps(body).encode()
    headers = {"content-type": "application/json"}
    if token:
        headers["authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    with urllib.request.urlopen(request, timeout=15) as response:
        return json.loads(response.read())


def chromium(width: int = 1100, height: int = 900, network_log: bool = False) -> WebDriver:
    """Start headless Chromium (Debian's) through the system chromedriver, nothing downloaded."""
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must not fetch a browser or a driver
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--no-first-run",
        f"--window-size={width},{height}",
    ):
        options.add_argument(argument)
    logs = {"browser": "ALL"}
    if network_log:
        logs["performance"] = "ALL"
    options.set_capability("goog:loggingPrefs", logs)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    if width < 500:  # a phone: the layout viewport, not the window, must be 375 wide
        driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 2, "mobile": True},
        )
    return driver


def wait_for(check: Callable[[], Any], timeout: float = 20, what: str = "") -> Any:
    """Return the first truthy result of ``check`` (retried while the page re-renders)."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            result = check()
            if result:
                return result
        except (StaleElementReferenceException, NoSuchElementException, WebDriverException) as exc:
            last = exc
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what or check}: {last!r}")


def table_state(driver: WebDriver) -> dict[str, str]:
    """The data attributes of the page's table (version, seat, phase, to-act, status)."""
    state: dict[str, str] = driver.execute_script(
        "const t = document.getElementById('table'); return t ? {...t.dataset} : {};"
    )
    return state


def legal(driver: WebDriver) -> list[str]:
    found: list[str] = driver.execute_script(
        "const a = document.getElementById('actions');return a ? JSON.parse(a.dataset.legal) : [];"
    )
    return found


def click(driver: WebDriver, css: str) -> None:
    """Click the element of ``css`` once it is there and enabled (the page re-renders often)."""

    def attempt() -> bool:
        element = driver.find_element(By.CSS_SELECTOR, css)
        if not element.is_enabled():
            return False
        element.click()
        return True

    wait_for(attempt, 10, f"a clickable {css}")


def css_string(text: str) -> str:
    return json.dumps(text)


def my_turn(driver: WebDriver) -> bool:
    state = table_state(driver) or {}
    return bool(legal(driver)) and state.get("phase") != "over"


def play_one(driver: WebDriver) -> str:
    """Play one move through the page as a person would: a take when there is one (pick its
    hand cards, then its arrangement), else turn, discard the first card offered, force,
    waive, refuse or leave.  Returns the action's text; waits for the page's next version."""
    actions = legal(driver)
    before = int(table_state(driver)["version"])
    takes = [a for a in actions if a.startswith("take")]
    discards = [a for a in actions if a.startswith("discard ")]
    if "turn" in actions:
        choice = "turn"
        click(driver, '#actions [data-action="turn"]')
    elif takes:
        choice = takes[0]
        hand = choice.split("=>")[0].split()[1:]
        click(driver, f"#takes [data-combo={css_string(' '.join(hand))}]")
        click(driver, f"#takes [data-take={css_string(choice)}]")
    elif discards:
        choice = discards[0]
        card = choice.split()[1]
        click(driver, f'[data-key="card-{card}"]')
        click(driver, '#actions [data-action="discard"]')
    else:
        choice = next(a for a in ("force", "waive", "refuse", "leave") if a in actions)
        click(driver, f'#actions [data-action="{choice}"]')
    wait_for(lambda: int(table_state(driver)["version"]) > before, 20, f"the page after {choice}")
    return choice


def hand_cards(driver: WebDriver, seat: int) -> list[str]:
    cards: list[str] = driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map(e => e.dataset.card);",
        f"#hand-{seat} [data-card]",
    )
    return cards


def seated_table(base: str) -> tuple[str, list[str]]:
    """A table with two people seated over HTTP (the test knows both hands)."""
    table = http("POST", f"{base}/tables", {"deals": 1})["table_id"]
    tokens = [
        http("POST", f"{base}/tables/{table}/join", {"name": name, "seat": seat})["token"]
        for seat, name in enumerate(("ana", "bob"))
    ]
    return table, tokens


def move(base: str, table: str, tokens: list[str], step: int) -> None:
    """The seat to act plays a move that keeps its hand hidden: turn, refuse, leave or waive."""
    for token in tokens:
        view = http("GET", f"{base}/tables/{table}/view", token=token)
        choice = next((a for a in HIDING_MOVES if a in view["legal_actions"]), None)
        if choice is not None:
            body = {"type": choice, "command_id": f"spect-{table}-{step}", "table_id": table}
            http("POST", f"{base}/tables/{table}/commands", body, token)
            return
    raise AssertionError(f"nobody can play a simple move at {table}")


def console_errors(driver: WebDriver) -> list[str]:
    """The page's JavaScript errors (network answers such as a 409 are expected, not errors)."""
    return [
        e["message"]
        for e in driver.get_log("browser")
        if e["level"] == "SEVERE" and e.get("source") != "network"
    ]
