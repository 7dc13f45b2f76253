"""The projector: follows the shard feeds and keeps every table's views, checkpointed atomically.

For each shard it follows (``<ns>:{sNN}:feed``, one entry per append: table, first and last
version), the projector keeps per table the view parts of :mod:`services.views_fold`
(``public``, ``seat0``, ``seat1``: :mod:`services.view_parts`) under
``KeySpace.table_view(table_id, part)``,
each a JSON string with the ``version`` it reflects, and the checkpoint
``<ns>:{sNN}:ckpt:projector``: the feed position of the last entry applied.  Views are folded
from the table streams alone; the projector never reads the deal seeds (see
:mod:`services.views_fold` for why the views need none).

One round (:meth:`Projector.step`), three round trips whatever the number of shards:

1. up to ``batch_size`` entries of every followed feed after its checkpoint: one ``XREAD BLOCK``
   on all of them at once, which answers at once with every feed that has entries, and
   otherwise wakes on the first new entry (a quiet deployment sees each command at once).
   Without waiting (``catch_up``, ``--once``), one read-only script call per shard, all in one
   pipeline, each returning its entries as one string;
2. group the entries by shard and table; for each table only the events it lacks are read:
   from the version in the in-memory fold cache, or, for a table not in the cache, the whole
   stream plus the version of its stored ``public`` view (so a projector that starts behind
   its views never writes an older version over a newer one).  One script call per shard
   reads all its tables' ranges (the store's ``READ_LUA`` framing), all in one pipeline;
3. fold, build the views of every table that moved (several entries of one table in a round
   cost one set of views);
4. per shard one Lua call (all shards' calls in one pipeline) that checks the lease and that the
   checkpoint is still the one the round started from, then SETs the views and the new
   checkpoint and PUBLISHes ``<table_id> <version>`` on ``<ns>:views`` per table, all or none.

Scripts run by EVALSHA and are loaded when the server answers NOSCRIPT (a restart, a flush).

Re-applying entries whose versions the views already reflect changes nothing: a table whose
cached fold is at or past an entry's last version is skipped, and the compare-and-set on the
checkpoint refuses a write from a projector whose idea of the feed position is stale.

Several processes: each shard is followed by one projector at a time, the holder of the lease
``<ns>:{sNN}:projlease`` (``SET NX PX``, renewed every third of ``lease_ms``), and the running
projectors share the shards the way the engine workers do (:meth:`Projector.balance`): each
heartbeats in ``<ns>:projectors`` and holds at most ``ceil(shards / live projectors)``, taking
free shards up to that share and giving back the excess.  Two projectors thus split the work
(each round is half as long), and when one stops or dies the other takes its shards (at once
after a clean stop, after at most ``lease_ms`` after a crash); the write script checks the
lease, so a projector that lost its lease while working writes nothing.

``--rebuild`` (:meth:`Projector.rebuild`) needs every lease of the namespace (stop the running
projectors first, or wait for their leases to lapse): it drops the checkpoints, rebuilds every
table's views from the event streams as of the current end of each feed, deletes projector view
keys of tables that have no stream, and writes the checkpoints.  Other keys under ``view:`` (a
lobby, …) are left alone.  An interrupted rebuild leaves the views correct but possibly ahead
of a missing checkpoint; run it again.

Metrics (``prometheus_client`` default registry): ``conquian_projector_lag_seconds`` (now minus
the time of the newest event applied; 0 when a blocking read finds the feeds caught up) and
``conquian_projector_events_applied_total``.  Logs: structlog with ``table`` and ``version``.

Redis Cluster: every script call touches the keys of one shard only, but the ``XREAD BLOCK``
over all followed feeds that starts each round spans slots; on a cluster, read the shards of one
node per call (not done yet).

``python -m services.projector`` and ``conquian project`` run on uvloop when it is installed
(it comes with ``uvicorn[standard]``), as the engine worker does.

The modules: :mod:`.scripts` (the Lua scripts), :mod:`.metrics`, :mod:`.records` (round and
rebuild counts, the pending writes and reads), :mod:`.core` (state, keys, fold cache, running
scripts in a pipeline), :mod:`.leases`, :mod:`.fetch` (reading tables' events), :mod:`.round`
(one round), :mod:`.rebuild`, :mod:`.run` (the :class:`Projector` class and
:func:`run_projector`) and :mod:`.cli` (``conquian project``, ``python -m services.projector``).
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
