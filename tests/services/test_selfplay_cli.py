"""``conquian selfplay``: the tally, its JSON, determinism, argument errors and the script."""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.bots import make_bot
from engine.game import fold
from engine.game_events import DealStarted, MatchStarted, StakesSettled
from services import cli
from services.selfplay.cli import (
    PlayedDeal,
    SelfplayConfig,
    _progress_bar,
    bot_rng,
    deal_deck,
    play_deal,
    run_selfplay,
)

ARGS = ["selfplay", "--deals", "20", "--seed", "1", "--players", "greedy,random", "--json"]


def _run_json(capsys: pytest.CaptureFixture[str], args: list[str]) -> dict[str, object]:
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1  # exactly one JSON object
    data = json.loads(out)
    assert isinstance(data, dict)
    return data


def test_selfplay_json_holds_the_tally(capsys: pytest.CaptureFixture[str]) -> None:
    data = _run_json(capsys, ARGS)
    assert data["deals"] == 20
    assert data["seed"] == 1
    assert data["rules"] == "classic"
    assert data["players"] == ["greedy", "random"]
    wins = data["wins"]
    assert isinstance(wins, list) and len(wins) == 2
    assert sum(wins) + data["draws"] == 20  # type: ignore[operator]
    assert data["decided"] == sum(wins)
    assert isinstance(data["mean_actions"], float) and data["mean_actions"] > 10
    assert data["actions"] == round(data["mean_actions"] * 20)


def test_selfplay_is_deterministic(capsys: pytest.CaptureFixture[str]) -> None:
    first = _run_json(capsys, ARGS)
    again = _run_json(capsys, ARGS)
    other = _run_json(capsys, [*ARGS[:4], "2", *ARGS[5:]])
    assert first == again
    assert other != first


def test_selfplay_prints_a_readable_tally(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["selfplay", "--deals", "4", "--seed", "3", "--rules", "bicycle"]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("selfplay: 4 deals, seed 3, rules bicycle\n")
    assert "seat 0 greedy" in captured.out and "seat 1 random" in captured.out
    assert "draws" in captured.out and "mean actions per deal" in captured.out
    assert captured.err == ""  # no progress bar when the output is not a terminal


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--deals", "0"], "argument --deals: must be at least 1, not 0"),
        (["--deals", "ten"], "argument --deals: not a whole number: 'ten'"),
        (["--players", "greedy,alphago"], "unknown bot 'alphago'; known: greedy, random"),
        (["--players", "greedy"], "name two bots separated by a comma, not 'greedy'"),
        (["--rules", "poker"], "unknown rule set 'poker'; known: automatic-forcing, bicycle"),
        (["--seed", "x"], "argument --seed: invalid int value: 'x'"),
    ],
)
def test_selfplay_rejects_bad_arguments(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["selfplay", *args])
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert message in captured.err
    assert captured.out == ""


def test_the_cli_needs_a_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main([])
    assert exit_info.value.code == 2
    assert "COMMAND" in capsys.readouterr().err


def test_every_registered_subcommand_sets_a_handler() -> None:
    parser = cli.build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert list(subparsers.choices) == [name for name, _ in cli.SUBCOMMANDS]
    for name, sub in subparsers.choices.items():
        assert callable(sub.get_default("handler")), name


def test_play_deal_returns_the_events_that_rebuild_the_deal() -> None:
    bots = (make_bot("greedy"), make_bot("random"))
    played = play_deal(bots, deal_deck(5, 0), bot_rng(5, 0), dealer=1)
    assert isinstance(played.events[0], MatchStarted)
    assert isinstance(played.events[1], DealStarted) and played.events[1].dealer == 1
    settled = [e for e in played.events if isinstance(e, StakesSettled)]
    assert len(settled) == 1 and settled[0].winner == played.outcome.winner
    match = fold(played.events)
    assert match is not None and match.over and match.deal is not None
    assert match.deal.outcome == played.outcome
    again = play_deal(bots, deal_deck(5, 0), bot_rng(5, 0), dealer=1)
    assert again == played


def test_run_selfplay_hands_every_deal_to_the_hook() -> None:
    seen: list[tuple[int, PlayedDeal]] = []
    config = SelfplayConfig(deals=6, seed=9, players=("random", "greedy"))
    result = run_selfplay(config, on_deal=lambda i, deal: seen.append((i, deal)))
    assert [i for i, _ in seen] == list(range(6))
    dealers = [d.events[1].dealer for _, d in seen]  # type: ignore[union-attr]
    assert dealers == [0, 1, 0, 1, 0, 1]
    assert result.actions == sum(len(d.plays) for _, d in seen)
    assert result.draws == sum(d.outcome.winner is None for _, d in seen)


def test_the_progress_bar_redraws_one_line() -> None:
    stream = io.StringIO()
    draw = _progress_bar(stream, width=4)
    draw(1, 2)
    draw(2, 2)
    assert stream.getvalue() == "\r[##..] 1/2\r[####] 2/2\r          \r"


def test_the_console_script_runs() -> None:
    script = Path(sys.executable).with_name("conquian")
    assert script.exists(), f"console script missing: {script} (pip install -e .)"
    result = subprocess.run(
        [str(script), *ARGS[:2], "3", *ARGS[3:]],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["deals"] == 3 and data["players"] == ["greedy", "random"]
    assert result.stderr == ""
