from __future__ import annotations

import statistics

import pytest
from sqlalchemy import func, select

from tao_harness.readiness.estimator import DurationHistory
from tao_harness.store import queries
from tao_harness.store.engine import Store, open_store
from tao_harness.store.models import LLMRequest, Session
from tao_harness.store.records import SessionRecord, ToolCallRecord
from tao_harness.store.synthetic import DEFAULT_START, generate_history
from tao_harness.store.writer import StoreWriter


def _call(call: str, session: str, family: str, started: float, duration: float | None) -> ToolCallRecord:
    return ToolCallRecord(
        id=call,
        session_id=session,
        tool_name=family,
        family=family,
        started_at=started,
        ended_at=None if duration is None else started + duration,
        duration_s=duration,
    )


@pytest.fixture
def store(db_url: str) -> Store:
    opened = open_store(db_url)
    with StoreWriter(opened) as writer:
        writer.submit_many(
            [
                _call("a", "s1", "Read", 10.0, 0.1),
                _call("b", "s1", "bash:pytest", 20.0, 5.0),
                _call("c", "s2", "bash:pytest", 30.0, 3.0),
                _call("d", "s2", "Read", 40.0, None),  # still running
                _call("e", "s2", "bash:git", 50.0, 0.05),
            ]
        )
    return opened


def test_recent_calls_filters_and_order(store: Store) -> None:
    with store:
        assert [c.id for c in queries.recent_calls(store)] == ["e", "d", "c", "b", "a"]
        assert [c.id for c in queries.recent_calls(store, session="s1")] == ["b", "a"]
        assert [c.id for c in queries.recent_calls(store, family="bash:pytest")] == ["c", "b"]
        assert [c.id for c in queries.recent_calls(store, since=30.0, limit=2)] == ["e", "d"]
        assert queries.recent_calls(store, session="nobody") == []


def test_durations_and_samples_skip_running_calls(store: Store) -> None:
    with store:
        assert list(queries.family_durations(store)) == [
            ("Read", 0.1),
            ("bash:pytest", 5.0),
            ("bash:pytest", 3.0),
            ("bash:git", 0.05),
        ]
        assert list(queries.family_durations(store, "bash:pytest")) == [
            ("bash:pytest", 5.0),
            ("bash:pytest", 3.0),
        ]
        samples = list(queries.call_samples(store))
        assert [(s.tool_name, s.started_at, s.duration_s) for s in samples][:2] == [
            ("Read", 10.0, 0.1),
            ("bash:pytest", 20.0, 5.0),
        ]
        assert len(samples) == 4 and queries.count_calls(store) == 5


def test_prune_removes_old_rows_and_empty_sessions(store: Store) -> None:
    with store:
        with StoreWriter(store) as writer:
            writer.submit(SessionRecord(id="s1", started_at=10.0, ended_at=25.0))
        result = queries.prune(store, before=35.0)
        assert (result.tool_calls, result.sessions) == (3, 1)  # a, b, c; s1 has nothing left
        assert [c.id for c in queries.recent_calls(store)] == ["e", "d"]
        with store.engine.connect() as conn:
            assert conn.execute(select(Session.id)).scalars().all() == ["s2"]


def test_synthetic_history_loads_and_is_reproducible(db_url: str) -> None:
    records = generate_history(sessions=6, calls_per_session=(15, 25), seed=3)
    assert records == generate_history(sessions=6, calls_per_session=(15, 25), seed=3)
    calls = [r for r in records if isinstance(r, ToolCallRecord)]
    with open_store(db_url) as store:
        with StoreWriter(store) as writer:
            writer.submit_many(records)
        history = DurationHistory.from_samples(queries.family_durations(store))
        # Timed-out calls are censored samples: their duration is the deadline, so they are left out.
        assert len(history) == len([c for c in calls if c.status != "timeout"]) < len(calls)
        with store.engine.connect() as conn:
            assert conn.execute(select(func.count()).select_from(LLMRequest)).scalar_one() == len(calls)
            assert conn.execute(select(func.count()).select_from(Session)).scalar_one() == 6
        stored = queries.recent_calls(store, limit=len(calls))
    assert all(DEFAULT_START <= (c.started_at or 0) <= DEFAULT_START + 2 * 86_400 for c in stored)
    assert not any("sk-test" in (c.command or "") for c in stored)  # the generator's fake keys got redacted
    assert any((c.command or "").startswith("OPENAI_API_KEY=[REDACTED] ") for c in stored)


def test_synthetic_durations_are_family_specific_and_heavy_tailed() -> None:
    calls = [r for r in generate_history(sessions=30, seed=1) if isinstance(r, ToolCallRecord)]
    by_family: dict[str, list[float]] = {}
    for call in calls:
        by_family.setdefault(call.family or "", []).append(call.duration_s or 0.0)
    assert statistics.median(by_family["Read"]) < 0.05 < 1.0 < statistics.median(by_family["bash:pytest"])
    pytest_times = sorted(by_family["bash:pytest"])
    assert pytest_times[int(0.99 * len(pytest_times))] > 4 * statistics.median(pytest_times)  # a real tail
    sleeps = [c for c in calls if c.command and c.command.startswith("sleep ") and "&&" not in c.command]
    assert sleeps and all((c.duration_s or 0) >= float((c.command or "").split()[1]) for c in sleeps)
    assert any(c.status == "timeout" and c.duration_s == c.timeout_s for c in calls)
