"""Finished tables out of Redis into an archive, and read back from it (``docs/archive.md``).

One concept a module: ``record`` (an archived table, its file format, the check of its
chain), ``folder`` (the ``Archive`` interface and the folder of files), ``redis_tables`` (a
table's keys in Redis: the index of finished tables, the read of a whole table, the delete
that checks the head), ``prepare`` (what of a table is kept), ``mover`` (``Archiver``: write,
read back, verify, delete), ``reads`` (the archive behind the store, for the gateway, replay
and the audit), ``service`` (the background mode ``python -m services.archive``), ``cli``
(``conquian archive``) and ``pause`` (a test hook).  The package itself only exports the
command line, whose imports wait until it runs: import the modules by name.
"""

from __future__ import annotations

from services.archive.cli import add_parser, run

__all__ = ["add_parser", "run"]
