"""The engine worker: command streams in, decided and appended events out, one owner per shard.

``python -m services.engine_worker`` (settings from the environment, ``services.settings``) or
``await run_worker(settings, stop)``.  What it does, for every shard it owns:

1. reads the shard's command stream ``<ns>:{sNN}:cmd`` in the consumer group ``engine`` (as
   consumer ``settings.worker_id``), up to ``batch_size`` entries per stream, in one
   XREADGROUP over the streams of every shard the worker owns (:mod:`.reader`);
2. parses each entry (``docs/services.md``: fields ``c`` command JSON, ``s`` seat, ``r``
   received ms); what does not parse is acknowledged at once and its rejection published;
3. decides the batch, all shards together (:mod:`.batch`), with
   :func:`services.table_batch.execute_many`: commands of one table in stream order, one after
   the other; different tables appended together, one pipelined round trip per round (each
   append is the store's atomic Lua call with the command id, so a redelivered or retried
   command is applied once and gets its first result);
4. XACKs the batch (an XACK per shard stream), then PUBLISHes a hint per command on
   ``<ns>:results`` (one round trip).

**Ownership.**  A shard is decided for by the holder of its lease (:mod:`services.shard_leases`):
taken when free or still held under the worker's own id (a previous process of it died), with
``PX lease_ms`` (1.5 s by default), renewed every tick (``lease_ms / 3``, at most 250 ms) by
compare-and-renew, released on a clean stop.  Each worker heartbeats in ``<ns>:workers`` and
holds at most ``ceil(shards / live workers)`` shards: it takes free shards (released, or
orphaned when a dead owner's lease expired) up to that share and releases the excess, so adding
worker processes adds capacity.
A worker appends for a shard only while it *knows* it holds the lease (the local deadline of the
last renewal); on lease loss it stops consuming that shard at once, leaving what it has not
appended pending for the next owner.  Two workers can still overlap for a moment (a paused
process that has not noticed its lease expired): the store makes that harmless, because an
append checks the command id, then the expected version and head hash, in one Lua call.

**Crash safety.**  Nothing is acknowledged before it is appended.  When a worker takes a shard it
first claims *every* pending entry of the group (XAUTOCLAIM, min idle 0: only the lease holder
consumes a shard, so whatever is pending belongs to a previous owner that died or gave up) and
processes them, in stream order, before it reads new entries.  A SIGKILLed worker's in-flight
commands are thus applied exactly once: those it had appended come back as duplicates with their
first result; the others are decided now.  While it owns a shard, a worker also sweeps entries
idle for ``claim_idle_ms`` (XAUTOCLAIM) that it does not hold in memory, a safety net for
entries read by a consumer that stopped between reading and processing; in the same sweep it
deletes the entries every group has acknowledged more than ``command_retention_ms`` ago
(:mod:`.consumed`: the stream is an intake, the events are the log).

**Bad input** (``docs/services.md``): an entry that does not parse (bad JSON, unknown type, too
large, missing fields, a seat that is not ``0``/``1``/empty, a table of another shard) is
acknowledged, never recorded (there is no trustworthy command id to record it under), and its
rejection is published when a command id can be read.  A command that parses but is refused
(illegal move, wrong seat, stale version, no such table) is recorded under its id by the table
service and changes nothing else.

**Failures and poison.**  A command whose execution raises unexpectedly stays pending; it and
the commands after it on the same table wait in memory (order kept) and are retried with a
backoff.  Redis being unreachable does not count as an attempt; anything else does, and so does
each earlier delivery (XPENDING's delivery count of a claimed entry, which grows when a poison
command kills the workers that read it): after :data:`MAX_DELIVERIES` the command is
acknowledged with a ``command/failed`` rejection recorded under its id, so a poison command never
blocks its shard.

**FastStream.** The process is a ``FastStream`` app around a ``RedisBroker`` (start, stop, logging).
One batch subscriber reads for the whole worker: :class:`.reader.ShardStreamsSubscriber` is
FastStream's batch stream subscriber (``StreamSub(group="engine", consumer=<worker id>, batch=True,
max_records=batch_size)``) whose read covers the streams of every shard the worker owns, asked anew
before each read.  A shard's stream joins the reads once its pending entries are taken over and
leaves them when its lease is lost or released (giving it up waits for a read or batch of it in
hand).  Under steady traffic this is what makes batches: one read, one append round trip and one
acknowledgement carry the commands of every shard instead of one shard's each
(``docs/performance.md``).  The subscriber uses a parser that keeps the raw entries (FastStream's
own parser decodes every field and fails the whole batch on one non-UTF-8 entry), a decoder that
passes them to the handler as its argument (the broker has ``apply_types=False``: FastDepends
resolved a ``Context`` argument in a worker thread, a thread hop for every batch), and the manual
ack policy: the handler XACKs with redis-py, in the pipeline that also publishes the hints, since
FastStream's ``msg.ack()`` sends no XACK unless given the client and group.  Claims, sweeps and
retries are redis-py calls run beside the subscriber, under the shard's lock, which a batch holds
for each of its shards.

**After an append.**  :meth:`EngineWorker.after_append` is called after every accepted (not
duplicate) command with the new table: an observer hook (the tests use it to see which worker
appended).  The turn clock is its own process that follows the feeds (docs/turn-clock.md).

**Metrics.**  ``conquian_commands_total{result="accepted|rejected|duplicate"}`` and the histogram
``conquian_append_seconds`` (one pipelined append round trip) in the default Prometheus
registry; ``python -m services.engine_worker`` serves them on ``CONQUIAN_METRICS_PORT`` when set.

**Modules.**  :mod:`.entries` parses command-stream entries; :mod:`.reader` is the FastStream
subscriber over several streams; :mod:`.batch` decides and acknowledges a batch of several
shards; :mod:`.runner` keeps one owned shard (take-over, claims, sweeps, retries, backlog) and
:mod:`.answers` answers commands (hints, logs, metrics, give-up, XACK); :mod:`.worker` holds
the leases, the runners, the FastStream app and the reader;
:mod:`.metrics` the Prometheus metrics; :mod:`.streams` the group and channel names;
:mod:`.serve` runs the process.
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
