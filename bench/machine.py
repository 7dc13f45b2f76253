"""What a benchmark says of the machine it ran on: the CPU model and the load average."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def cpu_model() -> str:
    """The first ``model name`` of ``/proc/cpuinfo`` (else what ``platform`` knows)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages, rounded."""
    return [round(x, 2) for x in os.getloadavg()]
