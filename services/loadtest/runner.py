"""A run: table slots kept busy until the run ends, and a monitor that cuts the intervals.

``--tables`` slots each play one table at a time, as the driver plays them: a coroutine a slot
through a ``TableLink`` (:meth:`Run.slot`, the gateway), or one loop for every table (the
streams).  Without ``--duration`` a slot plays one match and stops, and the run ends when
every slot has (or at ``--timeout``). With it, a slot starts a new table when its table's
match is over (or was given up), until the duration ends; then no command is sent any more,
and the commands in flight get ``--grace`` seconds for their results.  Ctrl-C (SIGINT) ends a
run of either kind the same way.  ``--ramp`` spreads the first tables' starts evenly.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Protocol

from services import log as service_log
from services.loadtest.ledger import Ledger
from services.loadtest.links import Context, TableGivenUp, TableLink, play_scripted
from services.loadtest.options import Options
from services.loadtest.pacing import Pacer
from services.loadtest.play import TablePlay
from services.loadtest.selfwatch import SelfWatch
from services.loadtest.stats import Interval, Stats, percentile, summary_ms
from services.tasks import cancel_and_wait

ERROR_PAUSE = 1.0
"""Seconds a slot waits after a table was given up before it starts the next one."""


class Driver(Protocol):
    """What carries the tables: ``GatewayDriver`` or ``StreamsDriver``."""

    async def start(self) -> None:
        """Open the driver's connections; raise NoService when the service does not answer."""

    async def close(self) -> None:
        """Close them."""

    def players(self, run: Run) -> list[Coroutine[Any, Any, None]]:
        """Return what plays the run's slots: a coroutine a slot, or one for them all."""


class LinkDriver(Protocol):
    """A driver that carries each table on a link of its own (``GatewayDriver``)."""

    def table(self, table_id: str, play: TablePlay) -> TableLink:
        """Return the link of one table."""


@dataclass
class RunEnd:
    """What a run leaves: the counts, the per-interval rows, and how long it took."""

    stats: Stats
    series: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    timed_out: bool = False
    interrupted: bool = False
    generator: dict[str, Any] = field(default_factory=dict)


OnInterval = Callable[[dict[str, Any], Stats], None]


def make_driver(options: Options) -> Driver:
    """Return the driver of ``--via``."""
    if options.via == "gateway":
        from services.loadtest.gateway import GatewayDriver

        return GatewayDriver(options)
    from services.loadtest.streams import StreamsDriver

    return StreamsDriver(options)


class Run:
    """One run of the load tool (see the module docstring)."""

    def __init__(self, options: Options, driver: Driver, on_interval: OnInterval) -> None:
        self.options = options
        self.driver = driver
        self.on_interval = on_interval
        self.stats = Stats()
        self.context = Context(
            self.stats,
            Pacer(options.rate),
            options.result_timeout,
            retry=options.retry,
            retry_for=options.timeout,
            ledger=Ledger(options.ledger) if options.ledger else None,
        )
        self.end = RunEnd(self.stats)
        self.selfwatch = SelfWatch()
        self.log: Any = service_log.get_logger("loadtest")
        self.active = 0
        self.interrupt = asyncio.Event()
        """Set (by Ctrl-C) to end the run as its duration would: no new command, then grace."""
        self._numbers = iter(range(1, 1 << 62))
        self._started = 0.0

    async def run(self) -> RunEnd:
        """Play until the run ends; return what it measured.

        Raises NoService when the driver cannot reach the service.
        """
        try:
            await self.driver.start()
        except BaseException:
            await self.driver.close()
            if self.context.ledger is not None:
                self.context.ledger.close()
            raise
        self._started = time.perf_counter()
        self.selfwatch.start()
        monitor = asyncio.create_task(self._monitor())
        slots = [asyncio.create_task(player) for player in self.driver.players(self)]
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError, RuntimeError):  # not the main thread
            loop.add_signal_handler(signal.SIGINT, self.interrupt.set)
        try:
            await self._until_done(slots)
        finally:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(signal.SIGINT)
            for task in slots:
                task.cancel()
            for task in slots:
                try:
                    await cancel_and_wait(task)
                except Exception as ended:  # a bug, not a table given up: say so
                    self.stats.error(f"slot/{type(ended).__name__}")
                    self.log.error("slot_failed", error=repr(ended))
            await cancel_and_wait(monitor)
            self.end.seconds = time.perf_counter() - self._started
            self._row(self.stats.cut())  # the last, partial interval
            await self.selfwatch.stop()
            cpu = self.selfwatch.cpu_seconds()
            self.end.generator = {
                "cpu_seconds": round(cpu, 3),
                "cpu_share": round(cpu / max(self.end.seconds, 1e-9), 3),
                "loop_lag_ms": summary_ms(self.selfwatch.lags),
            }
            await self.driver.close()
            if self.context.ledger is not None:
                self.context.ledger.close()
        return self.end

    async def _until_done(self, slots: list[asyncio.Task[None]]) -> None:
        options = self.options
        limit = options.timeout
        if options.duration is not None:
            limit = min(limit, options.duration)
        interrupted = asyncio.create_task(self.interrupt.wait())
        ends: set[asyncio.Future[Any]] = {asyncio.gather(*slots, return_exceptions=True)}
        ends.add(interrupted)
        await asyncio.wait(ends, timeout=limit, return_when=asyncio.FIRST_COMPLETED)
        interrupted.cancel()
        pending = [slot for slot in slots if not slot.done()]
        if not pending:
            return
        self.context.stop.set()  # no new command from here on
        self.end.interrupted = self.interrupt.is_set()
        if options.duration is None and not self.end.interrupted:
            self.end.timed_out = True
            self.log.warning("loadtest_timeout", unfinished=len(pending))
            return
        if self.end.interrupted:
            self.log.warning("loadtest_interrupted", unfinished=len(pending))
        await asyncio.wait(pending, timeout=options.grace)  # then cancelled: see ``unanswered``

    # --- what the drivers share ---------------------------------------------------------

    def start_at(self, index: int) -> float:
        """Return when slot ``index`` starts its first table (``--ramp``), on ``perf_counter``."""
        options = self.options
        return self._started + options.ramp * index / options.tables

    def next_table_id(self) -> str:
        """Return the id of the run's next table."""
        return f"{self.options.table_prefix}-{next(self._numbers)}"

    def given_up(self, table_id: str, given_up: TableGivenUp) -> None:
        """Count and log a table given up."""
        self.stats.error(given_up.code)
        self.log.warning("table_given_up", table=table_id, code=given_up.code, error=str(given_up))

    async def slot(self, index: int, driver: LinkDriver) -> None:
        """Play tables one after the other on links of ``driver`` (one only, without
        ``--duration``)."""
        options = self.options
        if options.ramp > 0:
            await asyncio.sleep(max(0.0, self.start_at(index) - time.perf_counter()))
        while not self.context.stop.is_set():
            given_up = await self._table(self.next_table_id(), driver)
            if options.duration is None:
                return
            if given_up:
                await asyncio.sleep(ERROR_PAUSE)

    async def _table(self, table_id: str, driver: LinkDriver) -> bool:
        """Play one table to its end; return whether it was given up."""
        play = TablePlay(table_id, self.options.seed, self.options.bad_share)
        link = driver.table(table_id, play)
        self.active += 1
        try:
            await link.open(self.stats)
            self.stats.table_started()
            if self.options.players == "bots":
                deadline = time.perf_counter() + self.options.timeout
                deals = await link.watch(deadline, self.stats)
                self.stats.table_finished(deals)
            elif await play_scripted(link, self.context):
                self.stats.table_finished(play.deals_finished)
            return False
        except TableGivenUp as given_up:
            self.given_up(table_id, given_up)
            return True
        finally:
            self.active -= 1
            await link.close()

    async def _monitor(self) -> None:
        interval = self.options.interval
        next_cut = self._started + interval
        while True:
            await asyncio.sleep(max(0.0, next_cut - time.perf_counter()))
            next_cut += interval
            self._row(self.stats.cut())

    def _row(self, interval: Interval) -> None:
        elapsed = time.perf_counter() - self._started
        previous = self.end.series[-1]["t"] if self.end.series else 0.0
        span = max(elapsed - previous, 1e-9)
        lags, cpu = self.selfwatch.cut()

        def ms(values: list[float], q: float) -> float | None:
            value = percentile(values, q)
            return None if value is None else round(value * 1000, 3)

        row = {
            "t": round(elapsed, 3),
            "sent": interval.sent,
            "results": interval.results,
            "commands_per_s": round(interval.results / span, 1),
            "sent_per_s": round(interval.sent / span, 1),
            "rejected": interval.rejected,
            "errors": interval.errors,
            "result_p50_ms": ms(interval.latencies["result"], 0.5),
            "result_p99_ms": ms(interval.latencies["result"], 0.99),
            "view_p50_ms": ms(interval.latencies["view"], 0.5),
            "view_p99_ms": ms(interval.latencies["view"], 0.99),
            "tables_active": self.active,
            "tables_started": interval.tables_started,
            "tables_finished": interval.tables_finished,
            "moves_seen": interval.moves_seen,
            "moves_per_s": round(interval.moves_seen / span, 1),
            "generator_cpu_share": round(cpu / span, 3),
            "generator_lag_max_ms": round(max(lags) * 1000, 3) if lags else None,
        }
        self.end.series.append(row)
        self.on_interval(row, self.stats)
