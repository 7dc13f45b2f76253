"""The error table of ``docs/api.md``, generated from the error catalogue (``engine.codes``).

``python -m services.gateway.error_table docs/api.md`` rewrites the region between the
:data:`BEGIN` and :data:`END` comments (``make schema`` runs it); ``--check`` exits 1 when the
committed table is stale (``tests/services/test_error_catalogue.py`` runs that check).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from engine.codes import Code
from services.gateway.generated import write_or_check

BEGIN = "<!-- begin error table: generated from engine/codes.py by `make schema` -->"
END = "<!-- end error table -->"


def render() -> str:
    """Return the Markdown table of every code: its HTTP status, close code and meaning."""
    rows = ["| code | status | close | meaning |", "|---|---|---|---|"]
    for code in Code:
        status = "—" if code.status is None else str(code.status)
        close = "—" if code.close is None else str(code.close)
        rows.append(f"| `{code.value}` | {status} | {close} | {code.meaning} |")
    return "\n".join(rows) + "\n"


def rewrite(text: str) -> str:
    """Return ``text`` with the region between the markers replaced by :func:`render`.

    Raises ValueError when the markers are missing or out of order.
    """
    start = text.find(BEGIN)
    end = text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"the document has no region between {BEGIN!r} and {END!r}")
    head = text[: start + len(BEGIN)]
    return f"{head}\n{render()}{text[end:]}"


def main(argv: list[str] | None = None) -> int:
    """Rewrite the table in the document given (``--check``: compare instead)."""
    parser = argparse.ArgumentParser(prog="python -m services.gateway.error_table")
    parser.add_argument("path", type=Path, help="the document holding the table (docs/api.md)")
    parser.add_argument("--check", action="store_true", help="exit 1 if the table is stale")
    args = parser.parse_args(argv)
    return write_or_check(args.path, rewrite(args.path.read_text("utf-8")), args.check)


if __name__ == "__main__":
    sys.exit(main())
