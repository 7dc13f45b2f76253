"""The engine worker: command streams in, decided and appended events out, one owner per shard.

``python -m services.engine_worker`` or ``await run_worker(settings, stop)``.  Its loop,
ownership, crash safety, bad input, poison commands, FastStream use, metrics and modules are in
``docs/services.md`` ("Engine worker" and "Module notes").
"""

from services.engine_worker.entries import ID_PEEK_BYTES, parse_entry
from services.engine_worker.metrics import APPEND_SECONDS, COMMANDS
from services.engine_worker.runner import ShardRunner
from services.engine_worker.serve import main, run_worker
from services.engine_worker.streams import GROUP
from services.engine_worker.worker import MAX_DELIVERIES, POLL_MS, EngineWorker
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
    "main",
    "parse_entry",
    "results_channel",
    "run_worker",
]
