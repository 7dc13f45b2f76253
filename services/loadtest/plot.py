"""The PNG of a run: throughput and latency over time, from the report's series.

Two panels sharing the time axis: commands/s (results received per interval; sent as a thin
line; bot tables' moves seen, when there are any), and p50 and p99 of each interval's latency
to the result and to the view, in ms; dotted lines mark the end of ``--ramp`` and of
``--duration``.  matplotlib draws with its Agg backend: no display is needed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def draw(report: dict[str, Any], path: str) -> None:
    """Write the plot of ``report`` to ``path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    series = report["series"]
    t = [row["t"] for row in series]
    figure, (top, bottom) = pyplot.subplots(2, 1, sharex=True, figsize=(10, 6.5))
    try:
        settings = report["settings"]
        rate = "flat out" if settings["rate"] is None else f"{settings['rate']:g}/s"
        figure.suptitle(
            f"conquian loadtest via {settings['via']}: {settings['tables']} tables "
            f"({settings['players']}), {rate}"
        )
        top.plot(t, [row["commands_per_s"] for row in series], color="C0", label="results/s")
        top.plot(
            t, [row["sent_per_s"] for row in series], color="C0", lw=0.8, ls="--", label="sent/s"
        )
        if any(row["moves_seen"] for row in series):
            top.plot(t, [row["moves_per_s"] for row in series], color="C2", label="bot moves/s")
        top.set_ylabel("per second")
        top.legend(loc="best")
        top.grid(alpha=0.3)
        for key, label, color in (("result", "to result", "C0"), ("view", "to view", "C1")):
            for q, style in (("p50", "-"), ("p99", ":")):
                values = [row[f"{key}_{q}_ms"] for row in series]
                points = [(x, y) for x, y in zip(t, values, strict=True) if y is not None]
                if points:
                    xs, ys = zip(*points, strict=True)
                    bottom.plot(xs, ys, color=color, ls=style, label=f"{label} {q}")
        bottom.set_ylabel("latency, ms")
        bottom.set_xlabel("seconds since the start")
        bottom.grid(alpha=0.3)
        if bottom.lines:
            bottom.legend(loc="best")
        for at, label in ((settings.get("ramp"), "ramp done"), (settings.get("duration"), "end")):
            if at:  # where the tables were all started, where sending stopped
                for axes in (top, bottom):
                    axes.axvline(float(at), color="grey", lw=0.8, ls=":")
                top.annotate(
                    label,
                    (float(at), 1.0),
                    xycoords=("data", "axes fraction"),
                    ha="right",
                    va="top",
                    fontsize=8,
                    color="grey",
                )
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(target, format="png", dpi=100)
    finally:
        pyplot.close(figure)
