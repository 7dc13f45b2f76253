"""The archiver as a service: ``python -m services.archive`` (``conquian serve`` runs it when
``CONQUIAN_ARCHIVE_DIR`` is set).

At start it indexes the finished tables that ended before the appends wrote the index
(``index_finished``) and removes temporary files a killed run left; then, every
``archive_interval_ms``, it archives the tables whose match ended more than
``archive_after_ms`` ago.  SIGTERM stops it between two batches.  One is enough; two are
safe (each table is deleted by the one script whose head check passes first, and both would
have written the same file).
"""

from __future__ import annotations

import asyncio
import sys

from services import log as service_log
from services.archive.folder import FolderArchive
from services.archive.mover import Archiver
from services.archive.redis_tables import index_finished
from services.followers.feed import run_until_signal, time_ms
from services.settings import Settings, load_settings
from services.store.outage import OUTAGE_ERRORS, Outage, connect_when_up, pause
from services.store.redis_store import RedisEventStore

__all__ = ["main", "run_archiver"]

_log = service_log.get_logger("archive")


async def run_archiver(settings: Settings, stop: asyncio.Event, batch: int = 100) -> None:
    """Archive finished tables every ``archive_interval_ms`` until ``stop`` is set."""
    if not settings.archive_dir:
        raise ValueError("the archiver needs CONQUIAN_ARCHIVE_DIR")
    client = await connect_when_up(settings.redis_url, _log, stop)
    if client is None:
        return
    try:
        store = RedisEventStore(client, settings.keys)
        archive = FolderArchive(settings.archive_dir, settings.namespace)
        stale = archive.remove_stale_temps()
        outage = Outage(_log, "archive")
        while (indexed := await _index(store, outage, stop)) is None:
            if stop.is_set():
                return
        _log.info("archiver started", archive=str(archive.folder), indexed=indexed, stale=stale)
        archiver = Archiver(store, archive, batch=batch)
        wait = settings.archive_interval_ms / 1000
        while not stop.is_set():
            try:
                tally = await archiver.archive_due(time_ms() - settings.archive_after_ms)
            except OUTAGE_ERRORS as error:  # the next round starts from what Redis holds
                await outage.wait(error, stop)
                continue
            outage.ok()
            if tally.archived or tally.refused or tally.moved:
                _log.info("archived", **{k: v for k, v in tally.as_dict().items() if k != "ok"})
            await pause(stop, wait)
    finally:
        await client.aclose()


async def _index(store: RedisEventStore, outage: Outage, stop: asyncio.Event) -> int | None:
    """Index the finished tables the appends did not (None: Redis away, try again)."""
    try:
        indexed = await index_finished(store)
    except OUTAGE_ERRORS as error:
        await outage.wait(error, stop)
        return None
    outage.ok()
    return indexed


def main() -> None:
    """``python -m services.archive``: run until SIGINT or SIGTERM."""
    settings = load_settings()
    service_log.configure(settings.log_level)
    if not settings.archive_dir:
        sys.stderr.write("services.archive: set CONQUIAN_ARCHIVE_DIR\n")
        sys.exit(2)
    run_until_signal(lambda stop: run_archiver(settings, stop))
