"""The ``zkconsumer`` entry point itself: flags that belong to no subcommand, and one-line
errors for the stack's directory."""

from __future__ import annotations

from pathlib import Path

import pytest

import zkconsumer
from zkconsumer import cli


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
    assert cli.main(["stack", action, "--dir", str(not_a_dir)]) == cli.EXIT_USAGE
    assert capsys.readouterr().err == (
        f"zkconsumer stack: {not_a_dir} is not a directory: give the stack a directory of its "
        "own\n")
    assert not_a_dir.read_text() == "mine\n"
