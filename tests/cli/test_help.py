"""Every `--help` the README points a newcomer to runs: each subcommand's, nested ones included
(`tao history tools`), found by walking the real parsers rather than listed by hand."""

from __future__ import annotations

import argparse

import pytest

from tao_harness.cli.main import COMMANDS, build_parser, main


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return {
        name: sub
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for name, sub in action.choices.items()
    }


def _command_paths() -> list[list[str]]:
    """Every command path, `["history"]` and `["history", "tools"]` alike."""
    paths: list[list[str]] = []
    for name in COMMANDS:
        # A subcommand's own arguments (and nested subcommands) are added only when it is the one chosen.
        chosen = _subcommands(build_parser([name]))[name]
        pending = [([name], chosen)]
        while pending:
            path, parser = pending.pop()
            paths.append(path)
            pending += [([*path, sub_name], sub) for sub_name, sub in _subcommands(parser).items()]
    return paths


def test_the_walk_finds_nested_subcommands() -> None:
    paths = _command_paths()
    assert ["history", "tools"] in paths and ["bench", "compare"] in paths and ["trace", "generate"] in paths


@pytest.mark.parametrize("flag", ["--help", "-h"])
@pytest.mark.parametrize("path", _command_paths(), ids=" ".join)
def test_every_help_prints_and_exits_0(path: list[str], flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main([*path, flag])
    assert exited.value.code == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"usage: tao {' '.join(path)}") and err == ""


def test_demo_with_an_unknown_policy_is_one_line_before_any_replica_starts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["demo", "--policy", "nosuch", "--sessions", "1"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("tao demo: error: --policy: unknown policy 'nosuch'; choose one of: tao")
