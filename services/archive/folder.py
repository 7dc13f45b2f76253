"""Where archived tables are kept: the :class:`Archive` interface and a folder of files.

An archive maps a table id to the bytes of its archived file (``services.archive.record``).
:class:`FolderArchive` keeps each in ``<root>/<namespace>/<xx>/<table id>.table.gz`` (``xx``:
the first two hex digits of the SHA-256 of the table id, so that no folder holds more than a
256th of the tables), written to a temporary file, fsynced, renamed into place and its folder
fsynced: a file is whole or absent, whenever the writer dies (``docs/archive.md``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from services.archive.pause import pause_point
from services.store.keys import check_table_id

__all__ = ["SUFFIX", "Archive", "FolderArchive"]

SUFFIX = ".table.gz"
"""The name of an archived table's file: ``<table id>.table.gz``."""
_TEMP = ".tmp"


class Archive(Protocol):
    """Archived tables by id: a folder here, object storage later.

    ``put`` returns once the bytes are durable and visible whole to ``get``; an object is never
    seen half written.  ``durable`` makes an object found by ``exists`` durable too (a folder:
    fsync of the file and its folder; object storage: nothing to do).
    """

    def put(self, table_id: str, data: bytes) -> None:
        """Store ``data`` as the table's archived file, replacing any before it."""

    def get(self, table_id: str) -> bytes | None:
        """Return the table's archived file, None when the table is not archived."""

    def exists(self, table_id: str) -> bool:
        """Say whether the table is archived."""

    def list(self) -> Iterator[str]:
        """Yield every archived table id, each once, in no particular order."""

    def durable(self, table_id: str) -> None:
        """Make sure an archived file that ``exists`` survives a crash of the machine."""


class FolderArchive:
    """An :class:`Archive` in a folder (see the module docstring)."""

    def __init__(self, root: Path | str, namespace: str) -> None:
        self.root = Path(root)
        self.folder = self.root / namespace

    def path(self, table_id: str) -> Path:
        """The file of a table (whether or not it exists)."""
        check_table_id(table_id)
        fan = hashlib.sha256(table_id.encode("utf-8")).hexdigest()[:2]
        return self.folder / fan / f"{table_id}{SUFFIX}"

    def put(self, table_id: str, data: bytes) -> None:
        path = self.path(table_id)
        _make_folder(path.parent)
        temp = path.parent / f".{table_id}.{os.getpid()}.{secrets.token_hex(4)}{_TEMP}"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            pause_point("written")
            os.replace(temp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp)
            raise
        pause_point("renamed")
        _fsync_folder(path.parent)

    def get(self, table_id: str) -> bytes | None:
        try:
            return self.path(table_id).read_bytes()
        except FileNotFoundError:
            return None

    def exists(self, table_id: str) -> bool:
        return self.path(table_id).is_file()

    def list(self) -> Iterator[str]:
        try:
            fans = sorted(os.scandir(self.folder), key=lambda e: e.name)
        except FileNotFoundError:
            return
        for fan in fans:
            if not fan.is_dir() or fan.name.startswith("."):
                continue
            for entry in os.scandir(fan.path):
                name = entry.name
                if name.endswith(SUFFIX) and not name.startswith("."):
                    yield name[: -len(SUFFIX)]

    def durable(self, table_id: str) -> None:
        path = self.path(table_id)
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        _fsync_folder(path.parent)

    def remove_stale_temps(self, older_than_s: float = 3600.0) -> int:
        """Delete temporary files a killed writer left, older than ``older_than_s``; return how
        many (a younger one may belong to a writer still at work)."""
        removed = 0
        limit = time.time() - older_than_s
        for fan in self.folder.glob("*") if self.folder.is_dir() else ():
            for temp in fan.glob(f".*{_TEMP}"):
                with contextlib.suppress(FileNotFoundError):
                    if temp.stat().st_mtime < limit:
                        temp.unlink()
                        removed += 1
        return removed

    def __repr__(self) -> str:
        return f"FolderArchive({str(self.root)!r}, {self.folder.name!r})"


def _make_folder(folder: Path) -> None:
    """Create ``folder`` (and its parents) durably, if it is not there yet."""
    if folder.is_dir():
        return
    _make_folder(folder.parent)
    with contextlib.suppress(FileExistsError):
        folder.mkdir()
    _fsync_folder(folder.parent)


def _fsync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
