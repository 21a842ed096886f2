"""GNU duration words: what `sleep` and `timeout` accept, and what they refuse."""

from __future__ import annotations

import pytest

from tao_harness.readiness.hints import parse_hints
from tao_harness.readiness.units import parse_duration


@pytest.mark.parametrize("word, seconds", [("5", 5.0), ("1.5m", 90.0), (".5", 0.5), ("2e1", 20.0), ("1d", 86400.0)])
def test_gnu_durations(word: str, seconds: float) -> None:
    assert parse_duration(word) == seconds


@pytest.mark.parametrize("word", ["５", "٣", "1５s", "5x", "", "inf"])
def test_words_gnu_refuses(word: str) -> None:
    assert parse_duration(word) is None


def test_full_width_sleep_gives_no_hint() -> None:
    assert parse_hints("bash", "sleep ５").min_s is None  # GNU: "invalid time interval"
    assert parse_hints("bash", "sleep 5").min_s == 5.0
