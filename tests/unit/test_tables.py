"""The tools' tables: nothing cut on a narrow terminal, plain columns when piped."""

from __future__ import annotations

import io

import pytest

from zkconsumer.cli.tables import Table, terminal_width

LONG_ID = "billing-service-group_worker-host-17.eu-west-1.compute.internal-1732780000000-9f3a2b1c-3"


def describe_table() -> Table:
    t = Table(["TOPIC", "PARTITION", "OFFSET", "LOG-END-OFFSET", "LAG", "OWNER"],
              right=["PARTITION", "OFFSET", "LOG-END-OFFSET", "LAG"])
    t.add_row("orders100", 0, 1200, 1500, 300, LONG_ID)
    t.add_row("orders100", 1, None, 1500, None, None)
    return t


def test_piped_rows_are_cells_joined_by_one_space_with_dashes_for_empty_cells() -> None:
    assert describe_table().lines(None) == [
        "TOPIC PARTITION OFFSET LOG-END-OFFSET LAG OWNER",
        f"orders100 0 1200 1500 300 {LONG_ID}",
        "orders100 1 - 1500 - -",
    ]


def test_a_table_that_fits_is_aligned_numbers_to_the_right() -> None:
    t = Table(["GROUP", "MEMBERS"], right=["MEMBERS"])
    t.add_row("orders100", 2)
    t.add_row("g", 12)
    assert t.lines(80) == [
        "GROUP      MEMBERS",
        "orders100        2",
        "g               12",
    ]


def test_too_wide_for_80_columns_it_is_stacked_and_nothing_is_cut() -> None:
    """rich shrank such a table to "order..." and "..." at 80 columns."""
    lines = describe_table().lines(80)
    assert lines == [
        "TOPIC           orders100",
        "PARTITION       0",
        "OFFSET          1200",
        "LOG-END-OFFSET  1500",
        "LAG             300",
        f"OWNER           {LONG_ID}",
        "",
        "TOPIC           orders100",
        "PARTITION       1",
        "OFFSET          -",
        "LOG-END-OFFSET  1500",
        "LAG             -",
        "OWNER           -",
    ]
    assert not any("..." in line or "…" in line for line in lines)


def test_print_lays_out_for_the_stream_it_writes_to(monkeypatch: pytest.MonkeyPatch) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setenv("COLUMNS", "80")
    tty, pipe = Terminal(), io.StringIO()
    assert (terminal_width(tty), terminal_width(pipe)) == (80, None)
    describe_table().print(tty)
    describe_table().print(pipe)
    assert tty.getvalue().splitlines() == describe_table().lines(80)
    assert pipe.getvalue().splitlines() == describe_table().lines(None)
    monkeypatch.setenv("COLUMNS", "200")
    wide = Terminal()
    describe_table().print(wide)
    assert wide.getvalue().splitlines()[1].split() == [
        "orders100", "0", "1200", "1500", "300", LONG_ID]


def test_a_row_of_the_wrong_length_is_refused() -> None:
    with pytest.raises(ValueError, match="2 cells for 6 columns"):
        describe_table().add_row("t", 1)
