"""Whole deals played in real Chromium against ``conquian serve``: two browsers against each
other, one against the bot (with a reload, a dropped socket and a rejection on the way), the
deck verified in the page, the replay viewer, and a phone-sized screen."""

from __future__ import annotations

import re

from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select

from tests.browser.harness import (
    HIDING_MOVES,
    chromium,
    click,
    console_errors,
    hand_cards,
    http,
    legal,
    my_turn,
    play_one,
    table_state,
    wait_for,
)

MOVES = 200  # far above any deal's length: a deal has at most 20 stock cards to turn


def create(driver: WebDriver, base: str, opponent: str, deals: int = 1, clock: str = "") -> str:
    """Open the start page, create a table against ``opponent``; return the table id."""
    driver.get(base + "/")
    name = wait_for(lambda: driver.find_element(By.NAME, "name"), what="the start form")
    name.clear()
    name.send_keys("ana")
    Select(driver.find_element(By.NAME, "opponent")).select_by_value(opponent)
    Select(driver.find_element(By.NAME, "clock")).select_by_value(clock)
    deals_box = driver.find_element(By.NAME, "deals")
    deals_box.clear()
    deals_box.send_keys(str(deals))
    click(driver, "#create")
    wait_for(lambda: table_state(driver), what="the table screen")
    match = re.search(r"#/t/(t-[a-z0-9]+)", driver.current_url)
    assert match, driver.current_url
    return match.group(1)


def deal_over(driver: WebDriver) -> bool:
    state = table_state(driver)
    return state.get("phase") == "over" or state.get("matchOver") == "yes"


def test_two_browsers_play_a_whole_deal_against_each_other(service: str) -> None:
    ana = chromium()
    bob = chromium()
    try:
        table = create(ana, service, "friend")
        link = wait_for(
            lambda: ana.find_element(By.ID, "invite-link").get_attribute("value"),
            what="the invitation link",
        )
        assert link.endswith(f"#/join/{table}")
        bob.get(link)  # the invitation opens the join screen
        wait_for(lambda: bob.find_element(By.CSS_SELECTOR, "#join-form input"))
        # ... and the table is in the lobby's waiting list too: bob joins from there
        bob.get(service + "/")
        click(bob, f'#lobby-waiting li[data-table="{table}"] button')
        assert bob.current_url.endswith(f"#/join/{table}")
        name = wait_for(lambda: bob.find_element(By.CSS_SELECTOR, "#join-form input"))
        name.clear()
        name.send_keys("bob")
        click(bob, "#join")
        wait_for(lambda: table_state(bob).get("seat") == "1", what="bob seated")
        wait_for(lambda: table_state(ana).get("phase") not in (None, "none"), what="the deal")
        played: list[str] = []
        for _ in range(MOVES):
            if deal_over(ana) and deal_over(bob):
                break
            mover = wait_for(
                lambda: (
                    next((d for d in (ana, bob) if my_turn(d)), None)
                    or (deal_over(ana) and deal_over(bob) and "over")
                ),
                what="a player to act",
            )
            if mover == "over":
                break
            played.append(play_one(mover))
        assert deal_over(ana) and deal_over(bob), played
        view = http("GET", f"{service}/tables/{table}")
        assert view["status"] == "over" and view["deal"]["outcome"] is not None
        for driver in (ana, bob):  # both pages show the end, the same version as the service
            wait_for(lambda d=driver: int(table_state(d)["version"]) == view["version"])
            assert table_state(driver)["matchOver"] == "yes"
            assert console_errors(driver) == []
        assert len(played) >= 6, played  # both pages moved, turn after turn

        # a rematch: ana asks and waits; bob agrees and goes; ana's page follows by itself
        click(ana, "#rematch")
        wait_for(lambda: "waiting for the other player" in ana.find_element(By.ID, "notice").text)
        click(bob, "#rematch")
        for driver, seat in ((bob, "1"), (ana, "0")):
            wait_for(lambda d=driver: f"/t/{table}" not in d.current_url, what="the rematch")
            wait_for(lambda d=driver, s=seat: table_state(d).get("seat") == s)
        assert ana.current_url == bob.current_url
    finally:
        ana.quit()
        bob.quit()


def test_a_deal_against_the_bot_survives_a_reload_a_drop_and_shows_rejections(
    service: str,
) -> None:
    driver = chromium()
    try:
        table = create(driver, service, "greedy")
        seat = table_state(driver)["seat"]
        assert seat == "0"
        moves = 0
        while moves < 2 or not set(HIDING_MOVES) & set(legal(driver)):
            # a few moves, up to one where a simple move (turn, refuse, leave, waive) is legal
            wait_for(lambda: my_turn(driver), what="ana's turn")
            if moves >= 2 and set(HIDING_MOVES) & set(legal(driver)):
                break
            play_one(driver)
            moves += 1
            assert not deal_over(driver), "a deal does not end in a few moves"
            wait_for(lambda: my_turn(driver), what="ana's turn")

        # a reload mid-deal: the same seat, the same hand, the same version
        before = (table_state(driver)["version"], sorted(hand_cards(driver, 0)))
        driver.refresh()
        wait_for(lambda: table_state(driver).get("version") == before[0])
        assert table_state(driver)["seat"] == "0"
        assert sorted(hand_cards(driver, 0)) == before[1]
        wait_for(lambda: "live" in driver.find_element(By.ID, "conn").text)

        # a move the table refuses is shown in words: the page is made stale (its socket
        # closed), the same move is played behind its back, then its button is pressed
        token = driver.execute_script(
            "return JSON.parse(localStorage.getItem('conquian.seats'))[arguments[0]].token;",
            table,
        )
        driver.execute_script("window.conquianLive.close()")
        simple = next(a for a in HIDING_MOVES if a in legal(driver))
        http(
            "POST",
            f"{service}/tables/{table}/commands",
            {"type": simple, "command_id": f"behind-{table}", "table_id": table},
            token,
        )
        click(driver, f'#actions [data-action="{simple}"]')
        notice = wait_for(lambda: driver.find_element(By.ID, "notice").text, what="the rejection")
        assert re.search(r"\((move|command)/[a-z_]+\)$", notice), notice
        assert len(notice.split()) > 4, notice  # words, not only a code
        driver.refresh()  # live again from where it was
        wait_for(lambda: "live" in driver.find_element(By.ID, "conn").text)

        # a dropped connection: the socket reconnects with `after` and carries on
        driver.execute_script(
            "window.oldSocket = window.conquianLive.socket; window.conquianLive.drop()"
        )
        wait_for(
            lambda: driver.execute_script(
                "const s = window.conquianLive.socket;"
                "return s !== window.oldSocket && s.readyState === WebSocket.OPEN;"
            ),
            what="a new socket",
        )
        wait_for(lambda: "live" in driver.find_element(By.ID, "conn").text)
        # (the rest of the deal is followed over the new socket)
        for _ in range(MOVES):
            if deal_over(driver):
                break
            wait_for(lambda: my_turn(driver) or deal_over(driver), what="ana's turn")
            if my_turn(driver):
                play_one(driver)
        assert deal_over(driver)
        view = http("GET", f"{service}/tables/{table}")
        wait_for(lambda: int(table_state(driver)["version"]) == view["version"], what="the end")

        # the deck: the revealed seed re-derived in the page matches the commitment
        click(driver, "#fairness [data-verify='1']")
        verdict = wait_for(
            lambda: driver.find_element(By.CSS_SELECTOR, "#fairness [data-verified]")
        )
        assert verdict.get_attribute("data-verified") == "ok", verdict.text
        assert "dealt hand" in verdict.text and "SHA-256" in verdict.text

        # a rematch: at a bot's table the first ask opens it, and the page goes there
        click(driver, "#rematch")
        wait_for(lambda: f"/t/{table}" not in driver.current_url, what="the rematch table")
        rematch = re.search(r"#/t/(t-[a-z0-9]+)", driver.current_url)
        assert rematch and rematch.group(1) != table
        wait_for(lambda: table_state(driver).get("seat") == "0", what="seated at the rematch")
        wait_for(lambda: table_state(driver).get("phase") not in (None, "none"))

        # the replay: step back and forward; the ended deal's hands are shown
        driver.get(f"{service}/#/replay/{table}")
        steps = int(
            wait_for(lambda: driver.find_element(By.ID, "replay").get_attribute("data-steps"))
        )
        assert steps > 8
        for _ in range(5):
            click(driver, "#back")
        assert driver.find_element(By.ID, "replay").get_attribute("data-step") == str(steps - 5)
        click(driver, "#forward")
        assert driver.find_element(By.ID, "replay").get_attribute("data-step") == str(steps - 4)
        for seat in (0, 1):
            shown = driver.find_elements(By.CSS_SELECTOR, f"#replay-seat-{seat} .hand [data-card]")
            hidden = driver.find_elements(By.CSS_SELECTOR, f"#replay-seat-{seat} .hand .card")
            assert len(shown) == len(hidden)  # every hand card face up
        assert console_errors(driver) == []
    finally:
        driver.quit()


def test_the_page_works_on_a_phone_sized_screen(service: str) -> None:
    driver = chromium(375, 667)
    try:
        create(driver, service, "random", clock="60")
        assert driver.execute_script("return [window.innerWidth, window.innerHeight]") == [375, 667]
        wait_for(lambda: my_turn(driver) or deal_over(driver), what="the first move")
        # nothing wider than the screen, every hand card and move button inside it
        assert driver.execute_script("return document.documentElement.scrollWidth") <= 375
        boxes = driver.execute_script(
            "return [...document.querySelectorAll('#hand-0 .card, #actions button')]"
            ".map(e => { const r = e.getBoundingClientRect(); return [r.left, r.right]; });"
        )
        assert boxes and all(left >= 0 and right <= 375 for left, right in boxes), boxes
        # the turn clock counts down from the table's 60 s
        first = wait_for(lambda: clock_seconds(driver), what="the turn clock")
        assert 0 < first <= 60
        wait_for(lambda: clock_seconds(driver) < first, what="the clock counting down")
        # the keyboard plays: a move's key (t, r, l, w) presses its button
        keys = {"turn": "t", "refuse": "r", "leave": "l", "waive": "w"}
        simple = next((a for a in keys if a in legal(driver)), None)
        if simple is not None:
            before = int(table_state(driver)["version"])
            driver.find_element(By.TAG_NAME, "body").send_keys(keys[simple])
            wait_for(lambda: int(table_state(driver)["version"]) > before, what="the key's move")
        elif my_turn(driver):
            play_one(driver)
        assert console_errors(driver) == []
    finally:
        driver.quit()


def clock_seconds(driver: WebDriver) -> int:
    text = driver.find_element(By.ID, "clock").text
    match = re.fullmatch(r"clock (\d+):(\d\d)", text)
    return int(match.group(1)) * 60 + int(match.group(2)) if match else 0


def test_a_seat_left_before_the_first_deal_is_free_again(service: str) -> None:
    driver = chromium()
    try:
        table = create(driver, service, "friend")
        assert http("GET", f"{service}/tables/{table}")["seats"][0]["name"] == "ana"
        click(driver, '#actions [data-action="leave_table"]')
        wait_for(lambda: driver.current_url.endswith("#/"), what="the start page")
        wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, "#lobby-waiting li"))
        # the socket the table closed (4401, its seat given up) is no error to show
        assert "bad_token" not in driver.find_element(By.ID, "notice").text
        assert http("GET", f"{service}/tables/{table}")["seats"][0] is None  # a free seat
        held = driver.execute_script("return localStorage.getItem('conquian.seats')")
        assert table not in held
        driver.get(f"{service}/#/t/{table}")  # now only a spectator of it
        wait_for(lambda: table_state(driver).get("seat") == "spectator")
        assert console_errors(driver) == []
    finally:
        driver.quit()
