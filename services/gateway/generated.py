"""A generated file of the repository (``make schema``): written, or checked to be current.

The AsyncAPI document, the error table in ``docs/api.md`` and the page's TypeScript
declarations are each rendered from code; :func:`write_or_check` is how each one's ``main``
writes it, or with ``--check`` tells that the committed copy is stale (``docs/services.md``).
"""

from __future__ import annotations

from pathlib import Path

from services.log import get_logger


def write_or_check(path: Path, text: str, check: bool) -> int:
    """Write ``text`` to ``path``, or with ``check`` compare it with what ``path`` holds; return
    the exit status (1: stale).  Logs one structlog line either way."""
    log = get_logger("generated", path=str(path))
    if check:
        current = path.read_text("utf-8") if path.is_file() else None
        if current != text:
            log.error("generated_file_stale", fix="make schema")
            return 1
        return 0
    path.write_text(text, "utf-8")
    log.info("generated_file_written")
    return 0
