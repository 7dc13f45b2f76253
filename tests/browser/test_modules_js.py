"""The page's modules in Chromium agree with the Python code: ``actionCommand`` turns every
legal action the engine lists into the wire command that means that action, and ``handMelds``
finds the sets and runs of a hand (jack after seven, the run limit kept); ``LiveTable`` delivers
each event once across a reconnect that resumes with ``after``, and stops on a final close."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from selenium.webdriver.remote.webdriver import WebDriver

from engine.legal import legal_actions
from engine.notation import format_action, parse_action, parse_position
from events.commands import parse_command
from events.mapping import to_engine_command
from tests.browser.harness import chromium, wait_for

NOTATION = Path(__file__).resolve().parents[2] / "docs/notation.md"


def run(driver: WebDriver, module: str, call: str, *args: Any) -> Any:
    script = (
        "const done = arguments[arguments.length - 1];"
        "const args = Array.from(arguments).slice(0, -1);"
        f"import('/web/{module}').then(m => ({call}))"
        ".then(done, e => done({error: String(e)}));"
    )
    return driver.execute_async_script(script, *args)


def legal_texts() -> list[str]:
    """Every legal action of every position written in docs/notation.md, and its examples."""
    text = NOTATION.read_text(encoding="utf-8")
    texts: list[str] = []
    for block in re.findall(r"```position\n(.*?)```", text, flags=re.S):
        for line in block.strip().splitlines():
            texts += [format_action(a) for a in legal_actions(parse_position(line))]
    for block in re.findall(r"```action\n(.*?)```", text, flags=re.S):
        texts += block.strip().splitlines()
    return sorted(set(texts))


def test_action_command_gives_the_wire_command_of_each_legal_action(service: str) -> None:
    texts = legal_texts()
    assert sum(t.startswith("take") and "=>" in t for t in texts) >= 5
    driver = chromium()
    try:
        driver.get(service + "/")
        wait_for(lambda: driver.execute_script("return document.readyState") == "complete")
        commands = run(driver, "conquian-client.js", "args[0].map(m.actionCommand)", texts)
        assert len(commands) == len(texts)
        for text, fields in zip(texts, commands, strict=True):
            wire = parse_command({**fields, "command_id": "modules-0001", "table_id": "t-x"})
            engine = to_engine_command(wire, 0)
            assert engine is not None and engine.action == parse_action(text), text

        melds = run(
            driver,
            "cards.js",
            "[m.handMelds(args[0], null), m.handMelds(args[0], 3), m.handMelds(args[1], null)]",
            ["AC", "2C", "3C", "5C", "5D", "5H", "6S", "7S", "JS", "QS"],
            ["2D", "4D", "6D", "7H", "JC", "KC", "KS"],
        )
        assert melds[0] == [["5C", "5D", "5H"], ["AC", "2C", "3C"], ["6S", "7S", "JS", "QS"]]
        assert melds[1][2] == ["6S", "7S", "JS"]  # no run longer than the rules allow
        assert melds[2] == []  # pairs and gaps make no meld

        # LiveTable: each event once, in order, across a reconnect that resumes with `after`
        trace = run(driver, "conquian-client.js", LIVE_SCRIPT)
        assert trace["urls"] == [
            "ws://gw.test/tables/t-1/ws?token=tok&after=3",
            "ws://gw.test/tables/t-1/ws?token=tok&after=6",
        ]
        assert trace["events"] == [4, 5, 6, 7]  # 5 and 6 sent twice, delivered once
        assert trace["views"] == [6, 7]
        assert trace["fatal"] == ["seat/bad_token"]  # 4401: no reconnect after it
        assert trace["count"] == 2
    finally:
        driver.quit()


LIVE_SCRIPT = """new Promise((resolve) => {
  const urls = [], events = [], views = [], fatal = [], sockets = [];
  class FakeSocket {
    constructor(url) { urls.push(url); sockets.push(this); }
    close() {}
    feed(message) { this.onmessage({ data: JSON.stringify(message) }); }
  }
  const client = new m.ConquianClient({ base: 'http://gw.test', WebSocket: FakeSocket });
  const live = client.live('t-1', {
    token: 'tok', after: 3,
    onEvent: (e) => events.push(e.version), onView: (v) => views.push(v.version),
    onFatal: (code) => fatal.push(code),
  });
  const event = (version) => ({ kind: 'event', event: { version, payload: {} } });
  const first = sockets[0];
  first.feed({ kind: 'hello' });
  [4, 5, 6].forEach((v) => first.feed(event(v)));
  first.feed({ kind: 'view', view: { version: 6 } });
  first.onclose({ code: 1006 });  // dropped: reconnects after a short wait
  setTimeout(() => {
    const second = sockets[1];
    second.feed({ kind: 'hello' });
    [5, 6, 7].forEach((v) => second.feed(event(v)));
    second.feed({ kind: 'view', view: { version: 7 } });
    second.feed({ kind: 'error', code: 'seat/bad_token', message: 'no' });
    second.onclose({ code: 4401 });
    setTimeout(() => {
      const count = sockets.length;
      // a socket its owner closed reports no late close (the gateway's 4401 after a leave)
      const late = (code) => fatal.push(`late ${code}`);
      const left = client.live('t-2', { token: 'tok', onFatal: late });
      left.close();
      sockets[sockets.length - 1].onclose({ code: 4401 });
      resolve({ urls: urls.slice(0, 2), events, views, fatal, count });
    }, 600);
  }, 600);
})"""
