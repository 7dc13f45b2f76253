"""The engine worker: command streams in, decided and appended events out, one owner per shard.

``python -m services.engine_worker`` or ``await run_worker(settings, stop)``.  Read
``loop.py`` for what happens to a command, ``worker.py`` and ``runner.py`` for ownership and
take-over; the rules are in ``docs/services.md`` ("Engine worker").
"""

from services.engine_worker.reader import GROUP
from services.engine_worker.worker import EngineWorker, run_worker

__all__ = ["GROUP", "EngineWorker", "run_worker"]
