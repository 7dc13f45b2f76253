"""Locust load for the gateway's HTTP API, from one machine or many (Locust's distributed mode).

Each user plays whole tables over HTTP with the tool's scripted moves; how to run it and its
options (``--conquian-deals``, ``--conquian-seed``, ``--conquian-rules``): ``docs/loadtest.md``.
"""

from __future__ import annotations

import uuid
from typing import Any

from locust import HttpUser, constant, events, task

from services.loadtest.play import TablePlay, command_json

MAX_STEPS = 5000
"""Requests of one table's loop at most: a table that never ends is given up."""


def _options(parser: Any) -> None:
    parser.add_argument("--conquian-deals", type=int, default=1, help="deals in a table's match")
    parser.add_argument("--conquian-seed", type=int, default=1, help="seed of the choices")
    parser.add_argument("--conquian-rules", default="classic", help="the tables' rule preset")


events.init_command_line_parser.add_listener(_options)  # type: ignore[no-untyped-call]


class TablePlayer(HttpUser):
    """Plays scripted tables through the gateway's HTTP API, one at a time."""

    wait_time = constant(0)

    @task
    def play_table(self) -> None:
        """Create a table, seat both players and play its match to the end."""
        options = self.environment.parsed_options
        table_id = f"lc-{uuid.uuid4().hex[:16]}"
        created = self.client.post(
            "/tables",
            json={
                "table_id": table_id,
                "deals": getattr(options, "conquian_deals", 1),
                "rules": getattr(options, "conquian_rules", "classic"),
            },
            name="/tables",
        )
        if created.status_code != 201:
            return
        tokens = []
        for seat in (0, 1):
            joined = self.client.post(
                f"/tables/{table_id}/join",
                json={"name": f"locust {seat}", "seat": seat},
                name="/tables/[id]/join",
            )
            if joined.status_code != 200:
                return
            tokens.append(joined.json()["token"])
        play = TablePlay(table_id, getattr(options, "conquian_seed", 1))
        self._play(play, tokens)

    def _play(self, play: TablePlay, tokens: list[str]) -> None:
        sent = 0
        for _ in range(MAX_STEPS):
            for seat in (0, 1):
                view = self.client.get(
                    f"/tables/{play.table_id}/view",
                    params={"min_version": play.version},
                    headers={"authorization": f"Bearer {tokens[seat]}"},
                    name="/tables/[id]/view",
                )
                if view.status_code != 200:
                    return
                play.see_view(seat, view.json())
            if play.over:
                return
            move = play.next_move()
            if move is None:
                continue
            sent += 1
            command = command_json(move, play.table_id, f"{play.table_id}-{sent:05d}")
            with self.client.post(
                f"/tables/{play.table_id}/commands",
                json=command,
                headers={"authorization": f"Bearer {tokens[move.seat]}"},
                name="/tables/[id]/commands",
                catch_response=True,
            ) as answer:
                if answer.status_code != 200:
                    answer.failure(f"{answer.status_code}: {answer.text[:200]}")
                    return
                play.see_version(answer.json().get("version"))
