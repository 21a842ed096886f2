"""Plain-text tables, for the command modules (cli/), the fault campaign (fleet/faults/) and the benchmark
scripts: below all of them, so nothing that prints a table imports a command module."""

from __future__ import annotations

from typing import Any, Iterable, Sequence


def format_table(rows: Iterable[Sequence[Any]], headers: Sequence[str]) -> str:
    """Left-aligned text columns, numbers right-aligned; `None` shows as '-'."""
    raw = [list(row) for row in rows]
    body = [[_cell(v) for v in row] for row in raw]
    widths = [len(h) for h in headers]
    for row in body:
        widths = [max(w, len(c)) for w, c in zip(widths, row)]
    numeric = [all(isinstance(r[i], (int, float)) or r[i] is None for r in raw) and bool(raw)
               for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if n else c.ljust(w) for c, w, n in zip(cells, widths, numeric)).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in body)])


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)
