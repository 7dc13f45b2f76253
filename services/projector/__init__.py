"""The projector: follows the shard feeds and keeps every table's views, checkpointed atomically.

``python -m services.projector`` or ``conquian project``.  Its rounds, leases, ``--rebuild``,
metrics and modules are in ``docs/services.md`` ("Projector" and "Module notes").  The package
itself only exports the command line, whose imports wait until it runs: import the modules by
name (``services.projector.run`` holds ``Projector`` and ``run_projector``).
"""

from __future__ import annotations

from services.projector.cli import add_parser

__all__ = ["add_parser"]
