"""Chained hashes of full KV blocks, computed incrementally.

Block i's hash covers its own token ids and block i−1's hash, so equal hashes mean equal prefixes
(as in vLLM's `hash_block_tokens`). Python's hash of a tuple of ints does not depend on
PYTHONHASHSEED, so callers (the simulator, several engines) can share precomputed chains.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

ROOT_HASH = 0x5EED_0B10C
"""Parent hash of a prompt's first block."""


def extend_block_hashes(token_ids: Sequence[int], block_size: int, hashes: list[int]) -> list[int]:
    """Append to `hashes` the chained hashes of `token_ids`' full blocks it lacks; returns `hashes`.

    `hashes` must already be the chain of a prefix of `token_ids` (empty is fine): only the blocks after
    it are hashed, which keeps a growing session's hashing linear in its new tokens.
    """
    parent = hashes[-1] if hashes else ROOT_HASH
    for start in range(len(hashes) * block_size, len(token_ids) - block_size + 1, block_size):
        parent = hash((parent, *token_ids[start : start + block_size]))
        hashes.append(parent)
    return hashes


def common_prefix_blocks(a: list[int], b: list[int], block_size: int, limit: int) -> int:
    """Most full blocks (≤ limit) on which the two token lists agree; list slices compare at C speed."""
    limit = min(limit, len(a) // block_size, len(b) // block_size)
    if a[: limit * block_size] == b[: limit * block_size]:
        return limit
    low, high = 0, limit - 1  # invariant: the first `low` blocks agree, block `high` does not fit fully
    while low < high:
        mid = (low + high + 1) // 2
        if a[: mid * block_size] == b[: mid * block_size]:
            low = mid
        else:
            high = mid - 1
    return low


class SessionHashMemo:
    """The last token list and block-hash chain seen per session (bounded, least recently used out)."""

    def __init__(self, capacity: int, block_size: int) -> None:
        self._capacity = capacity
        self._block_size = block_size
        self._entries: OrderedDict[str, tuple[list[int], list[int]]] = OrderedDict()

    def reusable_hashes(self, session_id: str | None, token_ids: list[int]) -> list[int]:
        """A new list: the remembered hashes of the longest full-block prefix shared with `token_ids`."""
        entry = self._entries.get(session_id) if session_id is not None else None
        if entry is None:
            return []
        self._entries.move_to_end(session_id)  # type: ignore[arg-type]
        known_tokens, known_hashes = entry
        shared = common_prefix_blocks(token_ids, known_tokens, self._block_size, len(known_hashes))
        return known_hashes[:shared]

    def forget(self, session_id: str) -> bool:
        return self._entries.pop(session_id, None) is not None

    def remember(self, session_id: str | None, token_ids: list[int], hashes: list[int]) -> None:
        """Keep references (not copies): a running request's lists keep growing and stay useful."""
        if session_id is None or self._capacity == 0:
            return
        self._entries[session_id] = (token_ids, hashes)
        self._entries.move_to_end(session_id)
        while len(self._entries) > self._capacity:
            self._entries.popitem(last=False)
