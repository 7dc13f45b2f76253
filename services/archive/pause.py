"""A test hook: stop the archiver at a named step so that a test can SIGKILL it right there.

With ``CONQUIAN_TEST_ARCHIVE_PAUSE=<step>:<n>`` in the environment, the ``n``-th time (from 1)
the archiver reaches ``step`` it writes ``paused at <step>`` and its pid to stderr and sleeps
until it is killed.  The steps, in the order a table meets them: ``exported`` (read from
Redis), ``written`` (temporary file fsynced, not yet renamed), ``renamed`` (in place, folder
not yet fsynced), ``verified`` (read back and checked, keys not yet deleted) and ``deleted``
(a batch's keys deleted).  Unset, as in every deployment, it costs a dictionary look-up.
"""

from __future__ import annotations

import os
import sys
import time

__all__ = ["PAUSE_ENV", "STEPS", "pause_point"]

PAUSE_ENV = "CONQUIAN_TEST_ARCHIVE_PAUSE"
STEPS = ("exported", "written", "renamed", "verified", "deleted")
_reached: dict[str, int] = {}


def pause_point(step: str) -> None:
    """Sleep for ever here when the environment asks to pause at this step this time."""
    wanted = os.environ.get(PAUSE_ENV)
    if not wanted:
        return
    name, _, count = wanted.partition(":")
    if name != step:
        return
    _reached[step] = _reached.get(step, 0) + 1
    if str(_reached[step]) != (count or "1"):
        return
    sys.stderr.write(f"paused at {step} pid {os.getpid()}\n")
    sys.stderr.flush()
    while True:
        time.sleep(60)
