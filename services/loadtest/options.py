"""The options of ``conquian loadtest``: the parser, and the frozen settings of a run."""

from __future__ import annotations

import argparse
import secrets
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from engine.rules import PRESETS

if TYPE_CHECKING:
    from services.cli import Subparsers

DESCRIPTION = """\
Drive N concurrent tables against a running service and measure it: through the gateway
(HTTP and WebSocket, as clients do) or straight onto the command streams (XADD, as the gateway
does), at a fixed rate or flat out, for a duration or until every table's match is over.
Scripted tables seat the tool on both seats (it picks legal actions from each seat's view,
deterministically from --seed); bot tables are created with a bot on both seats and watched.
Shows progress live; writes a JSON report and a PNG plot.  Send load only to a service of yours.
"""


@dataclass(frozen=True)
class Options:
    """Everything a run is told (the report repeats it under ``settings``)."""

    via: str = "gateway"
    url: str = "http://127.0.0.1:8000"
    redis_url: str = "redis://127.0.0.1:6379/0"
    namespace: str = "cq"
    shards: int = 16
    tables: int = 10
    players: str = "scripted"
    bots: tuple[str, str] = ("greedy", "random")
    deals: int = 1
    rules: str = "classic"
    duration: float | None = None
    rate: float | None = None
    ramp: float = 0.0
    seed: int = 1
    bad_share: float = 0.0
    result_timeout: float = 30.0
    timeout: float = 600.0
    grace: float = 10.0
    interval: float = 1.0
    http_connections: int = 100
    table_prefix: str = ""
    report: str | None = None
    plot: str | None = None
    display: str = "auto"
    retry: bool = False
    ledger: str | None = None

    def settings(self) -> dict[str, Any]:
        """Return the options as JSON data for the report (a Redis password hidden)."""
        from services.redis_server import redact_url

        data = asdict(self)
        data["bots"] = list(self.bots)
        data["redis_url"] = redact_url(self.redis_url)
        return data


def _bots(text: str) -> tuple[str, str]:
    names = [n.strip() for n in text.split(",")]
    if len(names) != 2 or not all(names):
        raise argparse.ArgumentTypeError(f"two bot names, seat 0 and seat 1: {text!r}")
    return names[0], names[1]


def _positive(kind: type[int] | type[float]) -> Any:
    def parse(text: str) -> int | float:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value

    parse.__name__ = kind.__name__
    return parse


def _share(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"a share is between 0 and 1, got {text}")
    return value


def add_parser(subparsers: Subparsers, name: str) -> argparse.ArgumentParser:
    """Register ``conquian loadtest``."""
    parser = subparsers.add_parser(
        name,
        help="drive concurrent tables and measure throughput and latency",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    where = parser.add_argument_group("where the load goes")
    where.add_argument(
        "--via",
        choices=["gateway", "streams"],
        default="gateway",
        help="gateway: HTTP create/join, commands, results and views over each seat's "
        "WebSocket; streams: XADD onto the shard command streams, results and views read "
        "from Redis (default: %(default)s)",
    )
    where.add_argument("--url", default=Options.url, help="the gateway (default: %(default)s)")
    where.add_argument(
        "--redis-url",
        help="Redis of --via streams, one server or any node of a cluster "
        "(default: the services' setting, REDIS_URL)",
    )
    where.add_argument(
        "--namespace",
        help="key namespace of --via streams (default: CONQUIAN_NAMESPACE, else cq)",
    )
    where.add_argument(
        "--shards",
        type=_positive(int),
        help="shard count of --via streams (default: CONQUIAN_SHARDS, else 16)",
    )
    what = parser.add_argument_group("what is played")
    what.add_argument(
        "--tables",
        type=_positive(int),
        default=Options.tables,
        help="tables played at once (default: %(default)s)",
    )
    what.add_argument(
        "--players",
        choices=["scripted", "bots"],
        default="scripted",
        help="scripted: the tool plays both seats; bots: a bot on both seats, the tool "
        "creates and watches (default: %(default)s)",
    )
    what.add_argument(
        "--bots",
        type=_bots,
        default=Options.bots,
        metavar="SEAT0,SEAT1",
        help="the bots of --players bots (default: greedy,random)",
    )
    what.add_argument(
        "--deals",
        type=_positive(int),
        default=Options.deals,
        help="deals in each table's match (default: %(default)s)",
    )
    what.add_argument(
        "--rules", choices=sorted(PRESETS), default="classic", help="rules (default: classic)"
    )
    what.add_argument(
        "--seed",
        type=int,
        default=Options.seed,
        help="seed of the scripted choices, per table and version (default: %(default)s)",
    )
    what.add_argument(
        "--bad-share",
        type=_share,
        default=0.0,
        help="share of positions where the other seat first sends the move out of turn, "
        "refused as move/not_your_turn (default: %(default)s)",
    )
    how = parser.add_argument_group("how long and how fast")
    how.add_argument(
        "--duration",
        type=_positive(float),
        default=None,
        help="seconds to run, replacing each finished table by a new one; without it the "
        "run ends when every table's match is over",
    )
    how.add_argument(
        "--rate",
        type=_positive(float),
        default=None,
        help="moves per second over all tables (default: flat out); creates and joins are "
        "not paced, spread them with --ramp",
    )
    how.add_argument(
        "--ramp",
        type=float,
        default=0.0,
        help="seconds over which the first tables are started, evenly (default: at once)",
    )
    how.add_argument(
        "--result-timeout",
        type=_positive(float),
        default=Options.result_timeout,
        help="seconds to wait for a result before the table is given up (default: %(default)s)",
    )
    how.add_argument(
        "--timeout",
        type=_positive(float),
        default=Options.timeout,
        help="the longest a run lasts, whatever else says (default: %(default)s)",
    )
    how.add_argument(
        "--grace",
        type=float,
        default=Options.grace,
        help="after --duration, seconds to wait for the results of commands in flight "
        "(default: %(default)s)",
    )
    how.add_argument(
        "--retry",
        action="store_true",
        help="ride out restarts of the service: connection errors, 503s and results that do "
        "not come are retried with the same command_id, sockets reconnected with after=",
    )
    how.add_argument(
        "--http-connections",
        type=_positive(int),
        default=Options.http_connections,
        help="pooled HTTP connections to the gateway for creates and joins "
        "(default: %(default)s); each seat has its own WebSocket",
    )
    how.add_argument(
        "--table-prefix",
        default="",
        help="table ids are <prefix>-<n> (default: lt- and 6 random hex digits)",
    )
    out = parser.add_argument_group("output")
    out.add_argument("--report", metavar="PATH", help="write the JSON report here")
    out.add_argument("--plot", metavar="PATH", help="write a PNG of throughput and latency here")
    out.add_argument(
        "--ledger",
        metavar="PATH",
        help="append one JSON line per accepted command: table_id, command_id, seat, version, at",
    )
    out.add_argument(
        "--interval",
        type=_positive(float),
        default=Options.interval,
        help="seconds per live line and per row of the time series (default: %(default)s)",
    )
    out.add_argument(
        "--display",
        choices=["auto", "rich", "plain", "none"],
        default="auto",
        help="live progress: rich on a terminal, plain lines otherwise (auto, the default)",
    )
    return parser


def from_args(args: argparse.Namespace) -> Options:
    """Return the options of parsed arguments; what ``--via streams`` was not told comes from
    the services' settings (``services.settings``: environment variables)."""
    from services.settings import load_settings

    prefix = args.table_prefix or f"lt-{secrets.token_hex(3)}"
    overrides = {
        key: value
        for key, value in (
            ("redis_url", args.redis_url),
            ("namespace", args.namespace),
            ("shards", args.shards),
        )
        if value is not None
    }
    service = load_settings(**overrides)
    return Options(
        via=args.via,
        url=args.url.rstrip("/"),
        redis_url=service.redis_url,
        namespace=service.namespace,
        shards=service.shards,
        tables=args.tables,
        players=args.players,
        bots=args.bots,
        deals=args.deals,
        rules=args.rules,
        duration=args.duration,
        rate=args.rate,
        ramp=max(0.0, args.ramp),
        seed=args.seed,
        bad_share=args.bad_share,
        result_timeout=args.result_timeout,
        timeout=args.timeout,
        grace=max(0.0, args.grace),
        interval=args.interval,
        http_connections=args.http_connections,
        table_prefix=prefix,
        report=args.report,
        plot=args.plot,
        display=args.display,
        retry=args.retry,
        ledger=args.ledger,
    )
