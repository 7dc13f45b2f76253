"""The load tool's live lines and rich table, and its plot, without a service."""

from __future__ import annotations

from pathlib import Path

from services.loadtest.display import Display, line
from services.loadtest.stats import Stats

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


ROW = {
    "t": 3.0,
    "commands_per_s": 120.5,
    "sent_per_s": 121.0,
    "result_p50_ms": 4.25,
    "result_p99_ms": 9.5,
    "view_p50_ms": 5.0,
    "view_p99_ms": 11.0,
    "rejected": 2,
    "errors": 0,
    "tables_active": 8,
    "tables_finished": 1,
    "moves_seen": 0,
    "moves_per_s": 0.0,
    "generator_cpu_share": 0.12,
    "generator_lag_max_ms": 2.5,
}


def test_a_plain_line_names_rate_latencies_and_counts() -> None:
    text = line(ROW)
    assert "120.5 cmd/s" in text and "result p50 4.2 p99 9.5 ms" in text
    assert "rejected 2 errors 0" in text and "bot moves" not in text
    assert text.endswith("tool cpu 0.12 lag 2.5 ms")
    assert "bot moves 7.0/s" in line({**ROW, "moves_seen": 7, "moves_per_s": 7.0})


def test_the_display_writes_plain_lines_when_not_on_a_terminal(tmp_path: Path) -> None:
    out = (tmp_path / "out.txt").open("w+")
    with Display("auto", "title", out) as display:
        assert display.mode == "plain"
        display.show(ROW, Stats().counts())
    out.seek(0)
    assert out.read() == line(ROW) + "\n"


def test_the_rich_display_renders_the_rows(tmp_path: Path) -> None:
    out = (tmp_path / "out.txt").open("w+")
    with Display("rich", "the title", out) as display:
        display.show(ROW, Stats().counts())
    out.seek(0)
    text = out.read()
    assert "the title" in text and "120.5" in text and "4.2/9.5" in text


def test_the_plot_is_a_png(tmp_path: Path) -> None:
    from services.loadtest.plot import draw

    report = {
        "settings": {
            "via": "gateway",
            "tables": 2,
            "players": "scripted",
            "rate": 50.0,
            "ramp": 1.0,
            "duration": 4.0,
        },
        "series": [ROW, {**ROW, "t": 4.0, "view_p99_ms": None}],
    }
    target = tmp_path / "plots" / "run.png"
    draw(report, str(target))
    assert target.read_bytes().startswith(PNG_SIGNATURE)
