"""The ``zkconsumer`` entry point itself: flags that belong to no subcommand, and one-line
errors for the stack's directory."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest

import zkconsumer
from zkconsumer import cli as cli
from zkconsumer.cli.app import build_parser
from zkconsumer.cli.common import EXIT_USAGE


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"zkconsumer {zkconsumer.__version__}\n"


@pytest.mark.parametrize("action", ["up", "status", "down"])
def test_a_stack_dir_that_is_a_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], action: str
) -> None:
    """It was "[Errno 17] File exists" (up) or a traceback-free but puzzling message."""
    not_a_dir = tmp_path / "notes.txt"
    not_a_dir.write_text("mine\n")
    assert cli.main(["stack", action, "--dir", str(not_a_dir)]) == EXIT_USAGE
    assert capsys.readouterr().err == (
        f"zkconsumer stack: {not_a_dir} is not a directory: give the stack a directory of its "
        "own\n")
    assert not_a_dir.read_text() == "mine\n"


def _usage_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as done:
        cli.main(list(argv))
    assert done.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    return captured.err


def test_an_unknown_flag_is_one_line_naming_it_in_the_subcommand(
        capsys: pytest.CaptureFixture[str]) -> None:
    """It printed the top-level usage ("usage: zkconsumer [-h] [-v] ..."), then the
    subcommand's 10-line usage."""
    assert _usage_error(capsys, "groups", "describe", "--zookeeper", "zk:2181", "--group", "g",
                        "--bogus") == (
        "zkconsumer groups describe: error: unknown flag --bogus (-h for help)\n")


@pytest.mark.parametrize(("argv", "said"), [
    # A misspelt required flag was "the following arguments are required: --zookeeper".
    (["groups", "describe", "--zookeper", "zk:2181", "--group", "g"],
     "zkconsumer groups describe: unknown flag --zookeper (did you mean --zookeeper?)"),
    # A misspelt one of a required group was "one of the arguments ... is required".
    (["offsets", "reset", "--zookeeper", "zk", "--group", "g", "--topic", "t", "--to-earlest"],
     "zkconsumer offsets reset: unknown flag --to-earlest (did you mean --to-earliest?)"),
    (["consumer-groups", "--zookeeper", "zk", "--describe", "--group", "g", "--topik", "t"],
     "zkconsumer consumer-groups: unknown flag --topik (did you mean --topic?)"),
    (["groups", "lag", "--zookeeper", "zk", "--window", "x"],
     "zkconsumer groups lag: argument --window: invalid int value: 'x'"),
])
def test_argparse_errors_are_one_line_with_the_flag_meant(
        capsys: pytest.CaptureFixture[str], argv: list[str], said: str) -> None:
    command, message = said.split(": ", 1)
    assert _usage_error(capsys, *argv) == f"{command}: error: {message} (-h for help)\n"


def test_a_bad_to_datetime_is_named_as_such(capsys: pytest.CaptureFixture[str]) -> None:
    """It was an error about --to (the flag the value is parsed for)."""
    assert cli.main(["offsets", "reset", "--zookeeper", "127.0.0.1:1", "--group", "g",
                     "--topic", "t", "--to-datetime", "yesterday"]) == EXIT_USAGE
    assert capsys.readouterr().err == (
        "zkconsumer offsets reset: --to-datetime 'yesterday' is not an ISO-8601 date-time "
        "(e.g. 2024-05-01T12:00:00Z)\n")


def _leaf_parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield parser
    for action in subs:
        for child in set(action.choices.values()):
            yield from _leaf_parsers(child)


def test_every_group_flag_has_help() -> None:
    missing = [p.prog for p in _leaf_parsers(build_parser()) for a in p._actions
               if "--group" in a.option_strings and not a.help]
    assert missing == []


def test_every_subcommands_help_ends_with_examples_and_every_option_has_help() -> None:
    """No -h of the 21 subcommands had an example; some options had no text."""
    from zkconsumer.cli.examples import EXAMPLES

    leaves = list(_leaf_parsers(build_parser()))
    assert len(leaves) == len(EXAMPLES) == 21
    for p in leaves:
        command = p.prog.removeprefix("zkconsumer ")
        text = p.format_help()
        tail = text.rstrip().split("examples:\n")[-1].splitlines()
        assert tail == [f"  {line}" for line in EXAMPLES[command]], (command, tail)
        for example in EXAMPLES[command]:
            # Each example parses as the subcommand's own command line.
            args = build_parser().parse_args(example.split()[1:])
            assert args._parser.prog == p.prog, example
        bare = [a.option_strings or a.dest for a in p._actions if not a.help]
        assert not bare, (command, bare)


def test_a_watched_table_taller_than_the_terminal_keeps_its_header_on_screen() -> None:
    """On an 80 x 30 terminal `groups lag --watch --group G` scrolled: the header left the
    screen at every redraw."""
    from zkconsumer.cli.lag import _screen

    lines = ["every 5 s, window 10: ...", "GROUP TOPIC PARTITION", *(f"row {i}" for i in range(40))]
    shown = _screen(lines, 30)
    assert len(shown) == 29  # the cursor's line stays free: nothing scrolls
    assert shown[:3] == lines[:3]
    assert shown[-1] == ("... 14 more lines: a taller terminal, --group or --json shows them")
    assert _screen(lines[:10], 30) == lines[:10]
