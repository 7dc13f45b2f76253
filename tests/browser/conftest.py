"""Fixtures of the browser tests: one ``conquian serve`` for the session, Chromium per test.

Without Debian's ``chromium`` and ``chromium-driver`` the tests are skipped on a workstation,
and FAIL under ``CI=true`` (``.ci/run`` installs both when they are missing).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.browser.harness import require_browser
from tests.services.serve_run import serving


@pytest.fixture(autouse=True)
def _chromium_present() -> None:
    require_browser()


@pytest.fixture(scope="session")
def service(redis_url: str) -> Iterator[str]:
    """The base URL of one ``conquian serve`` shared by every browser test."""
    with serving(redis_url, f"web-{uuid.uuid4().hex[:8]}") as base:
        yield base
