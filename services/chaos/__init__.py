"""``conquian chaos``: SIGKILL the services and Redis under load, then check what must hold.

Modules, one concept each: ``targets`` (finding and killing serve's services and the run's
Redis), ``killer`` (the seeded schedule and the log of kills), ``harness`` (Redis, serve, the
load tool and the killer, in order), ``checks`` (ledger against events, audit, views against a
rebuild; shared with the tests), ``report`` (JSON and text) and ``cli``.  ``docs/chaos.md``
describes a run and what it proves.
"""

from services.chaos.cli import add_parser

__all__ = ["add_parser"]
