"""The report of a chaos run: JSON data, and a short text table for the terminal.

Top-level keys: ``tool``, ``ok`` (every check held and every kind was killed), ``seconds``,
``settings``, ``redis_restarted_by``, ``kills`` (per kind: count and the longest and mean time
until it was replaced), ``kill_log`` (every kill), ``commands`` (``accepted`` per the ledger,
``lost``, ``doubled``, ``version_mismatch``, ``doubled_anywhere``), ``longest_stall_s`` and
``longest_stall_at_s``, ``audit`` (``conquian audit --all``'s summary), ``views`` (compared,
differing), ``load`` (the load tool's counts, errors and retries), ``machine`` (cores and load
average, from the load tool's report) and ``problems`` (why ``ok`` is false).
"""

from __future__ import annotations

from dataclasses import asdict
from statistics import mean
from typing import Any

from services.chaos.harness import Findings, Plan

REDIS_RESTARTED_BY = "serve"
"""Who starts Redis again after its SIGKILL: ``conquian serve``'s supervisor, as it restarts
the services (``services.serve.supervisor``)."""


def build(plan: Plan, findings: Findings) -> dict[str, Any]:
    """Return the report of a finished run."""
    kills = findings.killer.kills
    per_kind: dict[str, Any] = {}
    for kind in plan.kinds:
        backs = [k.back_s for k in kills if k.kind == kind]
        known = [b for b in backs if b is not None]
        per_kind[kind] = {
            "count": len(backs),
            "not_back": len(backs) - len(known),
            "back_max_s": round(max(known), 3) if known else None,
            "back_mean_s": round(mean(known), 3) if known else None,
        }
    load = findings.load
    commands = {
        **{k: findings.ledger[k] for k in ("accepted", "lost", "doubled", "version_mismatch")},
        "doubled_anywhere": len(findings.anywhere_doubled),
    }
    report: dict[str, Any] = {
        "tool": "conquian chaos",
        "seconds": round(findings.seconds, 3),
        "settings": {**asdict(plan), "folder": str(plan.folder), "kinds": list(plan.kinds)},
        "redis_restarted_by": REDIS_RESTARTED_BY,
        "kills": per_kind,
        "kill_log": [k.as_dict() for k in kills],
        "missed": dict(findings.killer.missed),
        "commands": commands,
        "ledger": findings.ledger,
        "doubled_anywhere_ids": findings.anywhere_doubled[:20],
        "longest_stall_s": findings.stall[0],
        "longest_stall_at_s": findings.stall[1],
        "audit": {k: findings.audit.get(k) for k in ("ok", "tables", "tables_failed", "events")},
        "audit_failures": findings.audit.get("failures", [])[:20],
        "views": {
            "compared": findings.views_compared,
            "differing": len(findings.views_differing),
            "differing_keys": findings.views_differing[:20],
        },
        "load": {
            "commands": load.get("commands"),
            "tables": load.get("tables"),
            "errors": load.get("errors"),
            "retries": load.get("retries"),
            "latency_ms": load.get("latency_ms"),
        },
        "all_up_at_end": findings.up_at_end,
        "machine": load.get("machine"),
    }
    report["problems"] = problems(report)
    report["ok"] = not report["problems"]
    return report


def problems(report: dict[str, Any]) -> list[str]:
    """Return what went wrong in a run, one sentence each (none: the run passed)."""
    found = [f"{kind} was never killed" for kind, k in report["kills"].items() if not k["count"]]
    found += [f"{kind} did not come back {k['not_back']} time(s)"
              for kind, k in report["kills"].items() if k["not_back"]]  # fmt: skip
    commands = report["commands"]
    if not commands["accepted"]:
        found.append("no command was accepted")
    for key in ("lost", "doubled", "version_mismatch", "doubled_anywhere"):
        if commands[key]:
            found.append(f"{key}: {commands[key]}")
    if report["audit"]["ok"] is not True:
        found.append(f"the audit failed on {report['audit']['tables_failed']} table(s)")
    if report["views"]["differing"]:
        found.append(f"{report['views']['differing']} view(s) differ from a rebuild")
    given_up = report["load"]["errors"] or {}
    if given_up:
        found.append(f"the load tool gave up {sum(given_up.values())} table(s): {given_up}")
    if not report["all_up_at_end"]:
        found.append("not every service was running at the end")
    return found


def text(report: dict[str, Any]) -> str:
    """Return the short text table of a report."""
    lines = [f"conquian chaos: {report['seconds']} s, {'OK' if report['ok'] else 'FAILED'}",
             f"{'killed':<14} {'kills':>5} {'back max s':>10} {'back mean s':>11}"]  # fmt: skip
    for kind, k in report["kills"].items():
        back_max = "-" if k["back_max_s"] is None else f"{k['back_max_s']:.2f}"
        back_mean = "-" if k["back_mean_s"] is None else f"{k['back_mean_s']:.2f}"
        lines.append(f"{kind:<14} {k['count']:>5} {back_max:>10} {back_mean:>11}")
    commands = report["commands"]
    lines += [
        f"accepted {commands['accepted']}  lost {commands['lost']}  doubled "
        f"{commands['doubled']} (anywhere {commands['doubled_anywhere']})",
        f"longest stall {report['longest_stall_s']} s (from {report['longest_stall_at_s']} s)",
        f"audit: {report['audit']['tables']} tables, {report['audit']['tables_failed']} failed; "
        f"views: {report['views']['compared']} compared, {report['views']['differing']} differ",
    ]
    lines += [f"problem: {p}" for p in report["problems"]]
    return "\n".join(lines) + "\n"
