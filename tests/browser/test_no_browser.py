"""Without Chromium the browser tests skip on a workstation and fail under CI=true."""

from __future__ import annotations

import pytest

from tests.browser import harness


def test_a_missing_chromium_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(harness, "CHROMIUM", "/nonexistent/chromium")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="chromium"):
        harness.require_browser()


def test_a_missing_chromium_skips_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(harness, "CHROMEDRIVER", "/nonexistent/chromedriver")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="chromedriver"):
        harness.require_browser()
