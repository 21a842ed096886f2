"""Return-time distributions from the most similar earlier calls (a kernel estimate over command text).

A family key alone (`bash:python`) mixes a 50 ms `python -c "print(1)"` with a 30 s training run. What
splits them is in the command: the script, the test file, the target, the imported libraries, and
whether this session already ran the same thing. So a call is described by the set of words of its
command (identifiers; numbers and punctuation dropped) plus its family and tool name, and every earlier
completed call of the same harness counts with weight

    w = J(query, call)^p × (session_weight if the same session ran it else 1),

J being the Jaccard similarity of the word sets (p = 4: near-identical commands dominate). The family's
own calls are added with a small total weight (`family_weight`), so a call unlike anything seen still
gets its family's distribution, and the harness's calls when the family is new. A call with no known
limit also gets a prior worth `unbounded_prior_weight` perfect matches — its family's calls, or the
harness's while the family has fewer than `prior_min_family`: without a limit one similar call that ran
265 s (an `apt-get` that downloaded) would make the next one 265 s, and an unbounded miss costs the most.
(The harness's calls alone were too broad a prior for Claude Code, whose tools range from a 50 ms Read to
minutes-long subagents.) The weighted sample, with censored (killed) calls handled as
`distribution.ReturnDistribution` explains, is the prediction.

Calls are kept per harness (a `cat` under mini-SWE-agent and under OpenHands are different machines),
at most `max_calls` per harness, the oldest dropped first; a call of a harness not seen yet (or not
named, as the live coordinator's may be) is compared with every harness's calls.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from tao_harness.readiness.distribution import ReturnDistribution

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TEXT_CHARS = 2000  # a heredoc script's head says what it imports; its tail adds little but cost


def call_words(tool_name: str, family: str, command: str | None, args: Mapping[str, Any] | None) -> frozenset[str]:
    """The word set a call is compared by: identifiers of its command (or of its argument values for a
    structured tool), plus its family and tool name as marked words."""
    text = command if command else " ".join(str(v) for v in (args or {}).values() if isinstance(v, (str, int)))
    return frozenset(_WORD.findall(text[:_TEXT_CHARS])) | {f"family:{family}", f"tool:{tool_name}"}


@dataclass(frozen=True)
class CallKey:
    """What is known about a call when it starts, as the neighbour search needs it."""

    words: frozenset[str]
    family: str
    session: str = ""
    harness: str = ""


@dataclass(frozen=True)
class NeighborConfig:
    """Kernel weights (chosen by session-wise cross-validation on real histories; see the module doc)."""

    power: float = 4.0
    session_weight: float = 3.0
    family_weight: float = 0.01
    unbounded_prior_weight: float = 3.0
    prior_min_family: int = 5
    max_calls: int = 4096


class _Growing:
    """A numpy array appended to one value at a time, in a buffer that doubles when full: a pool's per-call
    columns and its posting lists (as Python lists, converting the common words' postings, thousands of
    positions each, on every query was a quarter of a 300-session simulation's time)."""

    __slots__ = ("_buffer", "_count")

    def __init__(self, dtype: type) -> None:
        self._buffer = np.empty(8, dtype=dtype)
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def append(self, value: float | int | bool) -> None:
        if self._count == len(self._buffer):
            self._buffer = np.concatenate((self._buffer, np.empty_like(self._buffer)))
        self._buffer[self._count] = value
        self._count += 1

    def array(self) -> np.ndarray:
        return self._buffer[: self._count]


def _positions() -> _Growing:
    return _Growing(np.int64)


class _Pool:
    # One harness's calls, with an inverted index word -> call positions for the Jaccard numerators.
    # Per-call numbers and positions live in growing numpy arrays, so a query is vector arithmetic.
    def __init__(self) -> None:
        self.keys: list[CallKey] = []
        self.index: dict[str, _Growing] = defaultdict(_positions)
        self.by_family: dict[str, _Growing] = defaultdict(_positions)
        self._sessions: dict[str, int] = {}
        self._columns = {"duration": _Growing(np.float64), "censored": _Growing(np.bool_),
                         "size": _Growing(np.float64), "session": _Growing(np.int64)}

    def column(self, name: str) -> np.ndarray:
        return self._columns[name].array()

    def add(self, key: CallKey, duration_s: float, censored: bool) -> None:
        position = len(self.keys)
        session = self._sessions.setdefault(key.session, len(self._sessions))
        for name, value in (("duration", duration_s), ("censored", censored), ("size", len(key.words)),
                            ("session", session)):
            self._columns[name].append(value)
        self.keys.append(key)
        for word in key.words:
            self.index[word].append(position)
        self.by_family[key.family].append(position)

    def weights(self, query: CallKey, config: NeighborConfig, prior: float = 0.0) -> np.ndarray:
        # Kernel weights of every call for `query`, plus `prior` spread over its family (or all calls).
        n = len(self.keys)
        postings = [self.index[w].array() for w in query.words if w in self.index]
        shared = np.bincount(np.concatenate(postings), minlength=n) if postings else np.zeros(n)
        similarity = shared / (len(query.words) + self.column("size") - shared)
        weights = similarity ** config.power
        session = self._sessions.get(query.session) if query.session else None
        if session is not None:
            weights[self.column("session") == session] *= config.session_weight
        family = self.by_family.get(query.family)
        _spread(weights, family, config.family_weight)  # a new family: over every call
        if prior:  # over the family once it has enough calls, else over every call
            enough = family is not None and len(family) >= config.prior_min_family
            _spread(weights, family if enough else None, prior)
        return weights


def _spread(weights: np.ndarray, positions: _Growing | None, total: float) -> None:
    """`total` added to `weights` in equal parts over `positions`, or over every call when None."""
    if positions is None:
        weights += total / len(weights)
    else:
        weights[positions.array()] += total / len(positions)


class NeighborHistory:
    """Completed calls per harness; `distribution(key)` is the weighted return-time sample for a new call."""

    def __init__(self, config: NeighborConfig | None = None) -> None:
        self.config = config or NeighborConfig()
        self._pools: dict[str, _Pool] = {}

    def __len__(self) -> int:
        return sum(len(pool.keys) for pool in self._pools.values())

    def observe(self, key: CallKey, duration_s: float, *, censored: bool = False) -> None:
        """Add one finished call; `censored`: it was killed at a timeout, so it ran at least `duration_s`."""
        if not np.isfinite(duration_s) or duration_s < 0:
            return
        pool = self._pools.get(key.harness)
        if pool is None:
            pool = self._pools[key.harness] = _Pool()
        pool.add(key, float(duration_s), censored)
        if len(pool.keys) > 2 * self.config.max_calls:
            self._pools[key.harness] = _trimmed(pool, self.config.max_calls)

    def distribution(
        self, key: CallKey, *, lower_s: float | None = None, upper_s: float | None = None
    ) -> ReturnDistribution | None:
        """Return-time distribution of a call like `key`, from its harness's calls — or, for a harness with
        none yet (or none named), from every harness's; None when there are no calls at all."""
        own = self._pools.get(key.harness)
        pools = [own] if own is not None else list(self._pools.values())
        if not pools:
            return None
        prior = self.config.unbounded_prior_weight / len(pools) if upper_s is None else 0.0
        weights = np.concatenate([pool.weights(key, self.config, prior) for pool in pools])
        return ReturnDistribution.from_samples(
            np.concatenate([pool.column("duration") for pool in pools]), weights,
            np.concatenate([pool.column("censored") for pool in pools]),
            lower_s=lower_s, upper_s=upper_s)


def _trimmed(pool: _Pool, keep: int) -> _Pool:
    fresh = _Pool()
    durations, censored = pool.column("duration")[-keep:], pool.column("censored")[-keep:]
    for key, duration, killed in zip(pool.keys[-keep:], durations, censored):
        fresh.add(key, float(duration), bool(killed))
    return fresh
