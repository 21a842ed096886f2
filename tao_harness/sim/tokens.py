"""Synthetic token ids for simulated sessions, so the engine's prefix cache sees realistic reuse.

Sessions of one `prefix_group` start with the same ids (shared system prompt / task set); everything
else a session appends is drawn from its own generator. A reply's ids are scripted into the engine and
appended to the session's context, so the next turn's prompt extends the previous prompt plus reply and
hits the cache exactly as vLLM's chained block hashes allow. Deterministic for (seed, names).
"""

from __future__ import annotations

import zlib

import numpy as np

VOCAB_SIZE = 151_936  # Qwen3's vocabulary; ids are random over it, so unrelated blocks never collide


def _stable_key(name: str) -> int:
    return zlib.crc32(name.encode("utf-8"))


class TokenFactory:
    """Shared-prefix ids per group and per-session generators, all derived from one seed."""

    def __init__(self, seed: int) -> None:
        self._seed = seed
        self._prefixes: dict[str, list[int]] = {}

    def prefix(self, group: str, length: int) -> list[int]:
        """The first `length` ids of `group`'s shared prefix (longer requests extend it consistently)."""
        known = self._prefixes.setdefault(group, [])
        if len(known) < length:
            rng = np.random.default_rng([self._seed, _stable_key(group), len(known)])
            known.extend(rng.integers(0, VOCAB_SIZE, length - len(known)).tolist())
        return known[:length]

    def session(self, session_id: str) -> SessionTokens:
        return SessionTokens(np.random.default_rng([self._seed, _stable_key(session_id), 1]))


class SessionTokens:
    """One session's growing context: `ids` is the prompt the next request sends."""

    def __init__(self, rng: np.random.Generator) -> None:
        self._rng = rng
        self.ids: list[int] = []

    def fresh(self, count: int) -> list[int]:
        """`count` new ids from this session's generator (not yet part of the context)."""
        return self._rng.integers(0, VOCAB_SIZE, count).tolist() if count > 0 else []
