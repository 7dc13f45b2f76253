"""Structured JSON logging for every service: structlog with table, seat, command and version.

Call ``configure()`` once at start; get loggers with ``get_logger(name)`` and bind the table id,
seat, command id and version where they are known (``log.bind(table=..., seat=...)``).
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog

_configured = False


def configure(level: str = "INFO", stream: Any = None) -> None:
    """Send JSON lines (ISO time, level, logger, event and bound fields) to stderr."""
    global _configured
    logging.basicConfig(format="%(message)s", stream=stream or sys.stderr, level=level.upper())
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(sort_keys=False),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        # one write per line: ``print`` (PrintLogger) writes the line and its newline apart, and
        # under PYTHONUNBUFFERED (``conquian serve`` sets it for its services, which share one
        # stderr) another process's line could land between them
        logger_factory=structlog.WriteLoggerFactory(file=stream or sys.stderr),
        cache_logger_on_first_use=True,
    )
    _configured = True


def get_logger(name: str, **bound: Any) -> Any:
    """Return a structlog logger named ``name`` with the given fields bound."""
    if not _configured:
        configure()
    return structlog.get_logger(name).bind(logger=name, **bound)
