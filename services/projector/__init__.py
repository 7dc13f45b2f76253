"""The projector: follows the shard feeds and keeps every table's views, checkpointed atomically.

``python -m services.projector`` or ``conquian project``.  Its rounds, leases, ``--rebuild``,
metrics and modules are in ``docs/services.md`` ("Projector" and "Module notes").
"""

from services.projector.cli import main, run_command
from services.projector.core import CHECKPOINT
from services.projector.core import LEASE as LEASE
from services.projector.metrics import APPLIED, LAG
from services.projector.records import ProjectorBusy, RebuildStats, RoundStats
from services.projector.run import Projector, catch_up, project_once, run_projector
from services.projector.scripts import FEED_LUA as FEED_LUA
from services.projector.scripts import LEASE_LUA, WRITE_LUA
from services.projector.scripts import READ_MANY_LUA as READ_MANY_LUA
from services.projector.scripts import RELEASE_LUA as RELEASE_LUA

__all__ = [
    "APPLIED",
    "CHECKPOINT",
    "LAG",
    "LEASE_LUA",
    "WRITE_LUA",
    "Projector",
    "ProjectorBusy",
    "RebuildStats",
    "RoundStats",
    "catch_up",
    "main",
    "project_once",
    "run_command",
    "run_projector",
]
