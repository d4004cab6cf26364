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


def test_an_unknown_flag_prints_the_subcommands_usage(capsys: pytest.CaptureFixture[str]) -> None:
    """It printed the top-level usage ("usage: zkconsumer [-h] [-v] ...")."""
    with pytest.raises(SystemExit) as done:
        cli.main(["groups", "describe", "--zookeeper", "zk:2181", "--group", "g", "--bogus"])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: zkconsumer groups describe [-h] --zookeeper ZK")
    assert err.endswith("zkconsumer groups describe: error: unrecognized arguments: --bogus\n")


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
