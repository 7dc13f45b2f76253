"""``conquian loadtest``: concurrent tables against a running service, measured.

Modules, one concept each: ``options`` (the command line), ``play`` (a scripted table's next
move, shared with ``locustfile``), ``pacing`` (the rate), ``stats`` (counts, latencies),
``links`` (a table's protocol and play loop), ``gateway`` and ``streams`` (the two drivers,
``streams_table`` and ``feeds`` beside the latter), ``runner`` (slots, duration, intervals),
``display`` (live progress), ``report`` (JSON), ``plot`` (PNG), ``ledger`` (the accepted
commands, for ``conquian chaos``), ``cli`` (the subcommand).
``docs/loadtest.md`` is the user's guide.
"""

from services.loadtest.cli import add_parser

__all__ = ["add_parser"]
