"""``make screenshots``: the page's main screens as PNG files in ``docs/screenshots/``.

Runs ``conquian serve`` on ``REDIS_URL`` (else a private Redis in a temporary folder) and drives
headless Chromium through the screens a player sees: start, invitation, a deal against the bot
with a take being chosen, a phone, a spectator, the end of a deal with the deck verified, and
the replay viewer.  ``python -m tests.browser.screenshots docs/screenshots``.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from services.redis_server import LocalRedis
from tests.browser.harness import (
    chromium,
    click,
    http,
    legal,
    move,
    my_turn,
    play_one,
    seated_table,
    table_state,
    wait_for,
)
from tests.services.serve_run import serving


@contextmanager
def redis_url() -> Iterator[str]:
    url = os.environ.get("REDIS_URL")
    if url:
        yield url
        return
    with tempfile.TemporaryDirectory() as folder:
        server = LocalRedis(Path(folder) / "redis", stop_timeout=10)
        server.start()
        try:
            yield server.url
        finally:
            server.stop()


def shot(driver: WebDriver, folder: Path, name: str) -> None:
    """Save the whole page (desktop: the window made as tall as the page) or the screen (phone)
    as ``folder/name.png``."""
    driver.execute_script("document.activeElement?.blur(); window.scrollTo(0, 0)")
    if driver.execute_script("return window.innerWidth") >= 500:
        width = driver.get_window_size()["width"]
        driver.set_window_size(width, 700)
        for _ in range(3):  # the window's height includes what is not the page
            page = driver.execute_script("return document.documentElement.scrollHeight")
            inner = driver.execute_script("return window.innerHeight")
            if inner >= page:
                break
            outer = driver.get_window_size()["height"]
            driver.set_window_size(width, min(outer + page - inner, 2400))
    else:  # a phone: from the centre down, the player's hand and moves
        driver.execute_script("document.getElementById('centre')?.scrollIntoView()")
    path = folder / f"{name}.png"
    driver.save_screenshot(str(path))
    print(f"wrote {path}")


def lobby_tables(base: str) -> None:
    """Tables for the lobby to list: two waiting for a player, one being played."""
    http("POST", f"{base}/tables", {"deals": 3, "turn_seconds": 60, "rules": "long-runs"})
    waiting = http("POST", f"{base}/tables", {"deals": 5})["table_id"]
    http("POST", f"{base}/tables/{waiting}/join", {"name": "Zoe"})
    running = http("POST", f"{base}/tables", {"bots": {"1": "greedy"}, "target_score": 5})
    http("POST", f"{base}/tables/{running['table_id']}/join", {"name": "Luis"})


def bot_table(driver: WebDriver, base: str, bot: str = "greedy") -> str:
    driver.get(base + "/")
    wait_for(lambda: driver.find_element(By.ID, "create"))
    name = driver.find_element(By.NAME, "name")
    name.clear()
    name.send_keys("Ana")
    driver.find_element(By.CSS_SELECTOR, f"select[name=opponent] option[value={bot}]").click()
    deals = driver.find_element(By.NAME, "deals")
    deals.clear()
    deals.send_keys("1")
    click(driver, "#create")
    wait_for(lambda: table_state(driver).get("phase") not in (None, "none"))
    return str(table_state(driver)["table"])


def until_a_take(driver: WebDriver) -> bool:
    """Play until a take is offered; select its hand cards so its arrangements show."""
    for _ in range(60):
        wait_for(lambda: my_turn(driver) or table_state(driver).get("phase") == "over")
        if table_state(driver).get("phase") == "over":
            return False
        takes = [a for a in legal(driver) if a.startswith("take")]
        if takes:
            hand = takes[-1].split("=>")[0].split()[1:]
            click(driver, f'#takes [data-combo="{" ".join(hand)}"]')
            return True
        play_one(driver)
    return False


def to_the_end(driver: WebDriver) -> None:
    for _ in range(200):
        wait_for(lambda: my_turn(driver) or table_state(driver).get("phase") == "over")
        if table_state(driver).get("phase") == "over":
            return
        play_one(driver)


def main(folder: Path) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    with redis_url() as url, serving(url, "screenshots") as base:
        driver = chromium(1100, 700)
        try:
            lobby_tables(base)
            driver.get(base + "/")
            wait_for(lambda: "loading" not in driver.find_element(By.ID, "main").text)
            shot(driver, folder, "start")
            driver.find_element(
                By.CSS_SELECTOR, "select[name=opponent] option[value=friend]"
            ).click()
            click(driver, "#create")
            wait_for(lambda: driver.find_element(By.ID, "invite-link"))
            shot(driver, folder, "invitation")

            table = bot_table(driver, base)
            until_a_take(driver)
            shot(driver, folder, "deal-against-the-bot")
            to_the_end(driver)
            click(driver, "#fairness [data-verify='1']")
            wait_for(lambda: driver.find_element(By.CSS_SELECTOR, "#fairness [data-verified]"))
            shot(driver, folder, "deal-over-deck-verified")
            driver.get(f"{base}/#/replay/{table}")
            wait_for(lambda: driver.find_element(By.ID, "replay"))
            for _ in range(6):
                click(driver, "#back")
            shot(driver, folder, "replay")

            watched, tokens = seated_table(base)
            for step in range(5):
                move(base, watched, tokens, step)
            version = http("GET", f"{base}/tables/{watched}")["version"]
            driver.get(f"{base}/#/t/{watched}")
            wait_for(lambda: int(table_state(driver).get("version", 0)) >= version)
            shot(driver, folder, "spectator")
        finally:
            driver.quit()
        phone = chromium(375, 667)
        try:
            bot_table(phone, base, "random")
            until_a_take(phone)
            shot(phone, folder, "phone")
        finally:
            phone.quit()
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/screenshots")))
