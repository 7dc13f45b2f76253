"""Fixtures of the browser tests: one ``conquian serve`` for the session, Chromium per test.

Without Debian's ``chromium`` and ``chromium-driver`` the tests are skipped on a workstation,
and FAIL under ``CI=true`` (``.ci/run`` installs both when they are missing).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.browser.harness import missing_browser, serve


def _ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


@pytest.fixture(autouse=True)
def _chromium_present() -> None:
    missing = missing_browser()
    if missing is None:
        return
    message = f"headless Chromium is missing ({missing}): apt-get install chromium chromium-driver"
    if _ci():
        pytest.fail(message + " (CI=true: the browser tests never skip)", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def service(redis_url: str) -> Iterator[str]:
    """The base URL of one ``conquian serve`` shared by every browser test."""
    with serve(redis_url) as base:
        yield base
