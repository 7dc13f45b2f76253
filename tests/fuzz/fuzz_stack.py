"""The bounded Hypothesis settings of the fuzz tests, fixed deal seeds, and the known tables.

Hypothesis runs derandomized with a bounded number of examples (profile ``fuzz-ci``), so that a
run is reproducible and fits ``make test``; ``CONQUIAN_FUZZ=long`` selects ``fuzz-long`` (random
seeds, twenty times the examples) for a longer hunt (docs/api.md, "Fuzzing").
"""

from __future__ import annotations

import hashlib
import itertools
import os
from collections.abc import Callable
from dataclasses import dataclass

import httpx
from hypothesis import HealthCheck, Phase, settings

LONG = os.environ.get("CONQUIAN_FUZZ", "").strip().lower() == "long"
SCALE = 20 if LONG else 1
"""How many times the ``fuzz-ci`` example counts a ``fuzz-long`` run takes."""

settings.register_profile(
    "fuzz-ci",
    derandomize=True,  # the same examples on every run: a failure in CI reproduces locally
    database=None,
    deadline=None,  # a request's time depends on the machine's load, never a failure
    phases=(Phase.explicit, Phase.generate, Phase.shrink),
    suppress_health_check=(
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ),
    print_blob=True,
)
settings.register_profile("fuzz-long", settings.get_profile("fuzz-ci"), derandomize=False)
PROFILE = settings.get_profile("fuzz-long" if LONG else "fuzz-ci")


def examples(count: int) -> settings:
    """Return the fuzz profile with ``count`` examples (times :data:`SCALE`)."""
    return settings(PROFILE, max_examples=count * SCALE)


def fixed_seeds() -> Callable[[], bytes]:
    """Return a source of deal seeds that gives the same seeds in the same order every run."""
    counter = itertools.count()
    return lambda: hashlib.sha256(f"fuzz-seed-{next(counter)}".encode()).digest()


@dataclass
class Tables:
    """The known tables of a fuzz stack and their seats' tokens.

    ``play`` has both seats taken and a deal in play; when a fuzzed command ends its match
    (a resignation, say), :meth:`renew` seats two players at a new one, so that the cards
    stay hidden for the fuzzers to look for.  ``open`` has seat 0 taken.
    """

    play: str
    open: str
    tokens: dict[str, dict[int, str]]
    renewed: int = 0

    @property
    def ids(self) -> tuple[str, str]:
        return self.play, self.open

    def token(self, table_id: str, seat: int) -> str | None:
        """Return the token of ``seat`` on a known table, None where nobody holds it."""
        return self.tokens.get(table_id, {}).get(seat)

    def renew(self, client: httpx.Client) -> None:
        """Make a new ``play`` table with both seats taken (from a fuzzer's thread)."""
        self.renewed += 1
        table_id = f"fz-play-{self.renewed}"
        created = client.post("/tables", json={"table_id": table_id, "deals": 3})
        assert created.status_code == 201, created.text
        tokens = {}
        for seat, name in ((0, "Ana"), (1, "Bo")):
            joined = client.post(f"/tables/{table_id}/join", json={"name": name, "seat": seat})
            assert joined.status_code == 200, joined.text
            tokens[seat] = joined.json()["token"]
        self.tokens[table_id] = tokens
        self.play = table_id
