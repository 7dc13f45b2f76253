"""The engine worker: command streams in, decided and appended events out, one owner per shard.

``python -m services.engine_worker`` or ``await run_worker(settings, stop)``.  Read
``loop.py`` for what happens to a command, ``worker.py`` and ``runner.py`` for ownership and
take-over; the rules are in ``docs/services.md`` ("Engine worker").
"""

from services.engine_worker.entries import GROUP, ID_PEEK_BYTES, parse_entry
from services.engine_worker.metrics import APPEND_SECONDS, COMMANDS
from services.engine_worker.runner import ShardRunner
from services.engine_worker.worker import MAX_DELIVERIES, POLL_MS, EngineWorker, run_worker
from services.hint_channels import results_channel

__all__ = [
    "APPEND_SECONDS",
    "COMMANDS",
    "GROUP",
    "ID_PEEK_BYTES",
    "MAX_DELIVERIES",
    "POLL_MS",
    "EngineWorker",
    "ShardRunner",
    "parse_entry",
    "results_channel",
    "run_worker",
]
