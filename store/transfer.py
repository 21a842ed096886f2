"""Tool-call export and import as CSV or JSON Lines; `read_calls(write_*(calls))` gives the calls back.

One row per call with every ToolCallRecord field. CSV writes an unknown value as an empty cell and
the JSON-valued fields (args, hints) as JSON text; JSON Lines writes one object per line. Reading
checks every field and reports the first bad one with its line number.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
from typing import Any, Callable, Iterable, Iterator, TextIO

from tao_harness.store.records import ToolCallRecord

FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(ToolCallRecord))
_JSON_FIELDS = {"args", "hints"}
_FLOAT_FIELDS = {"timeout_s", "env_timeout_s", "started_at", "ended_at", "duration_s"}
_INT_FIELDS = {"exit_code"}
_BOOL_FIELDS = {"background"}
_REQUIRED = {"id", "session_id"}
FORMATS = ("csv", "jsonl")


class ImportFormatError(ValueError):
    """An import file that cannot be read as exported calls; the message names the line and field."""


def _as_dict(record: ToolCallRecord) -> dict[str, Any]:
    row = {name: getattr(record, name) for name in FIELDS}
    for name in _JSON_FIELDS:
        if row[name] is not None:
            row[name] = dict(row[name])
    return row


def write_jsonl(records: Iterable[ToolCallRecord], out: TextIO) -> int:
    count = 0
    for count, record in enumerate(records, 1):
        out.write(json.dumps(_as_dict(record), sort_keys=False) + "\n")
    return count


def write_csv(records: Iterable[ToolCallRecord], out: TextIO) -> int:
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(FIELDS)
    count = 0
    for count, record in enumerate(records, 1):
        row = _as_dict(record)
        writer.writerow(
            ""
            if row[name] is None
            else json.dumps(row[name])
            if name in _JSON_FIELDS
            else str(row[name]).lower()
            if name in _BOOL_FIELDS
            else row[name]
            for name in FIELDS
        )
    return count


WRITERS: dict[str, Callable[[Iterable[ToolCallRecord], TextIO], int]] = {
    "csv": write_csv,
    "jsonl": write_jsonl,
}


def _parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false", "1", "0"):
        return value.lower() in ("true", "1")
    raise ValueError(f"expected true/false, got {value!r}")


def _parse_float(value: Any) -> float:
    number = float(value)
    if math.isnan(number):
        raise ValueError("NaN is not a duration or time")
    return number


def _convert(name: str, value: Any, from_csv: bool) -> Any:
    if value is None or (from_csv and value == ""):
        return None
    if name in _JSON_FIELDS:
        parsed = json.loads(value) if from_csv else value
        if not isinstance(parsed, dict):
            raise ValueError("expected a JSON object")
        return parsed
    if name in _FLOAT_FIELDS:
        return _parse_float(value)
    if name in _INT_FIELDS:
        return int(value)
    if name in _BOOL_FIELDS:
        return _parse_bool(value)
    if not isinstance(value, str):
        raise ValueError(f"expected text, got {type(value).__name__}")
    return value


def _record(raw: dict[str, Any], line: int, from_csv: bool) -> ToolCallRecord:
    unknown = set(raw) - set(FIELDS)
    if unknown:
        raise ImportFormatError(f"line {line}: unknown field {sorted(unknown)[0]!r}")
    values: dict[str, Any] = {}
    for name in FIELDS:
        try:
            values[name] = _convert(name, raw.get(name), from_csv)
        except (ValueError, TypeError) as exc:
            raise ImportFormatError(f"line {line}: field {name!r}: {exc}") from None
    missing = [name for name in sorted(_REQUIRED) if not values[name]]
    if missing:
        raise ImportFormatError(f"line {line}: field {missing[0]!r} is required")
    return ToolCallRecord(**values)


def _read_jsonl(lines: Iterable[str]) -> Iterator[ToolCallRecord]:
    for number, text in enumerate(lines, 1):
        if not text.strip():
            continue
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ImportFormatError(f"line {number}: not JSON: {exc.msg}") from None
        if not isinstance(raw, dict):
            raise ImportFormatError(f"line {number}: expected a JSON object")
        yield _record(raw, number, from_csv=False)


def _read_csv(lines: Iterable[str]) -> Iterator[ToolCallRecord]:
    reader = csv.DictReader(lines)
    if reader.fieldnames is None or not _REQUIRED <= set(reader.fieldnames):
        raise ImportFormatError("line 1: CSV header must name at least the id and session_id columns")
    for raw in reader:
        if None in raw:
            raise ImportFormatError(f"line {reader.line_num}: more cells than header columns")
        yield _record(raw, reader.line_num, from_csv=True)


def read_calls(source: TextIO) -> Iterator[ToolCallRecord]:
    """Calls from an export file; the format is recognised from its first character."""
    first = source.readline()
    rest = source
    lines = _chain(first, rest)
    if first.lstrip().startswith("{"):
        return _read_jsonl(lines)
    if first.strip():
        return _read_csv(lines)
    return iter(())


def _chain(first: str, rest: TextIO) -> Iterator[str]:
    yield first
    yield from rest
