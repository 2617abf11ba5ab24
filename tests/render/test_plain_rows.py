"""Large tables are drawn without rich (render/console.plain_lines) when they need no colour and no
wrapping: the lines must be exactly rich's, for any table it accepts (`probe --list` of a 50,000-node
model took a minute of CPU to draw through rich)."""
from __future__ import annotations

import io

from hypothesis import given, settings
from hypothesis import strategies as st

from inspector_cli.render.console import PLAIN_ROWS, make_console, plain_lines, print_view, rich_table
from inspector_cli.render.table import Cell, Table, View

WORD = st.text(alphabet="ab xyz019._/-…[]\t\x1b", max_size=14)  # control characters are made visible first


def rich_lines(table: Table, width: int) -> str:
    out = io.StringIO()
    make_console(out, no_color=True, width=width).print(rich_table(table))
    return out.getvalue()


@st.composite
def tables(draw):  # type: ignore[no-untyped-def]
    columns = draw(st.lists(WORD, min_size=1, max_size=6))
    table = Table(title="t", columns=columns, numeric=draw(st.lists(st.booleans(), max_size=len(columns))))
    for _ in range(draw(st.integers(0, 12))):
        table.rows.append([Cell(t) for t in draw(st.lists(WORD, min_size=len(columns), max_size=len(columns)))])
    return table


@settings(max_examples=400, deadline=None)
@given(tables(), st.integers(10, 160))
def test_the_plain_lines_are_richs_own(table: Table, width: int) -> None:
    lines = plain_lines(table, width)
    if lines is not None:
        assert "\n".join(lines) + "\n" == rich_lines(table, width)


def test_a_table_too_wide_or_with_wide_characters_is_left_to_rich() -> None:
    table = Table(title="t", columns=["name", "n"], numeric=[False, True])
    table.add("conv1", "3")
    assert plain_lines(table, 80) == ["name   n", "\u2500" * 8, "conv1  3"]
    assert plain_lines(table, 7) is None  # rich wraps or elides: not ours to imitate
    table.add("\u65e5\u672c", "4")  # two terminal cells per character
    assert plain_lines(table, 80) is None


def test_a_long_table_prints_the_same_through_either_path() -> None:
    table = Table(title="selectable", columns=["tensor", "op", "count"], numeric=[False, False, True])
    for i in range(PLAIN_ROWS + 5):
        table.add(f"/encoder/layer.{i}/attention/MatMul_output_0", "MatMul", str(i * 37))
    fast, slow = io.StringIO(), io.StringIO()
    print_view(View(tables=[table], notes=["a note"], verdict="PASS: done", passed=True),
               make_console(fast, no_color=True, width=100))
    slow_console = make_console(slow, no_color=True, width=100)
    slow_console.print("selectable")
    slow_console.print(rich_table(table))
    slow_console.print("a note")
    slow_console.print("PASS: done")
    assert fast.getvalue() == slow.getvalue()
    assert fast.getvalue().splitlines()[4] == "/encoder/layer.1/attention/MatMul_output_0    MatMul     37"
