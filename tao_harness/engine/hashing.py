"""Chained hashes of full KV blocks, computed incrementally.

Block i's hash covers its own token ids and block i−1's hash, so equal hashes mean equal prefixes
(as in vLLM's `hash_block_tokens`). Python's hash of a tuple of ints does not depend on
PYTHONHASHSEED, so callers (the simulator, several engines) can share precomputed chains.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # hashing.py imports nothing from the engine, so it loads on its own
    from tao_harness.engine.block_pool import BlockRun

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


class _Remembered:
    """A plain class: a dataclass needs its module registered, and a test loads this file on its own."""

    __slots__ = ("tokens", "hashes", "blocks", "settled")

    def __init__(self, tokens: list[int], hashes: list[int], blocks: BlockRun | None) -> None:
        self.tokens = tokens
        self.hashes = hashes
        self.blocks = blocks  # what the session's last finished request cached (a lookup guess)
        self.settled = False  # the request owning `tokens` has finished: the next one may take the list


class SessionHashMemo:
    """Per session (bounded, least recently used out): the last token list and block-hash chain seen,
    and the blocks its last request held, which probably still hold the next prompt's prefix.

    Once that request has finished, its token list is handed on to the session's next request when the
    next prompt extends it (`adopt_tokens`), so a turn does not copy and free the whole context."""

    def __init__(self, capacity: int, block_size: int) -> None:
        self._capacity = capacity
        self._block_size = block_size
        self._entries: OrderedDict[str, _Remembered] = OrderedDict()

    def reusable_hashes(self, session_id: str | None, token_ids: list[int]) -> list[int]:
        """A new list: the remembered hashes of the longest full-block prefix shared with `token_ids`."""
        entry = self._entries.get(session_id) if session_id is not None else None
        if entry is None:
            return []
        self._entries.move_to_end(session_id)  # type: ignore[arg-type]
        shared = common_prefix_blocks(token_ids, entry.tokens, self._block_size, len(entry.hashes))
        return entry.hashes[:shared]

    def adopt_tokens(
        self, session_id: str | None, prompt: Sequence[int], hashes: list[int]
    ) -> list[int] | None:
        """The finished request's token list extended in place to `prompt`, when `hashes` (the chain of
        `prompt`'s full blocks) shows that list is a prefix of it; None otherwise."""
        entry = self._entries.get(session_id) if session_id is not None else None
        if entry is None or not entry.settled or len(prompt) < len(entry.tokens):
            return None
        tokens, size = entry.tokens, len(entry.tokens)
        checked = min(size // self._block_size, len(entry.hashes), len(hashes))
        # Equal chained hashes mean equal blocks (the prefix cache trusts the same); the rest is compared.
        if checked and hashes[checked - 1] != entry.hashes[checked - 1]:
            return None
        start = checked * self._block_size
        if prompt[start:size] != tokens[start:]:
            return None
        entry.settled = False
        tokens.extend(prompt[size:])
        return tokens

    def last_blocks(self, session_id: str | None) -> BlockRun | None:
        entry = self._entries.get(session_id) if session_id is not None else None
        return None if entry is None else entry.blocks

    def forget(self, session_id: str) -> bool:
        return self._entries.pop(session_id, None) is not None

    def remember(self, session_id: str | None, token_ids: list[int], hashes: list[int]) -> None:
        """Keep references (not copies): a running request's lists keep growing and stay useful."""
        if session_id is None or self._capacity == 0:
            return
        previous = self._entries.get(session_id)
        blocks = None if previous is None else previous.blocks  # kept until this request finishes
        self._entries[session_id] = _Remembered(token_ids, hashes, blocks)
        self._entries.move_to_end(session_id)
        while len(self._entries) > self._capacity:
            self._entries.popitem(last=False)

    def settle(self, session_id: str | None, tokens: list[int], blocks: BlockRun) -> None:
        """The session's request with `tokens` finished, leaving `blocks` cached."""
        entry = self._entries.get(session_id) if session_id is not None else None
        if entry is not None:
            entry.blocks = blocks
            entry.settled = entry.tokens is tokens  # a later request of the session may be running
