"""The KV block pool: reference counts, the prefix-cache hash map and the LRU free queue (vLLM V1).

Invariant: a block is free exactly when its reference count is 0. A free block keeps its hash (it still
answers prefix lookups) until it is allocated again: allocation takes the least recently freed block
and only then forgets that hash (lazy LRU eviction). Freed blocks join the tail, a request's blocks in
reverse order, so its last blocks are evicted first and the shared head of a prompt survives longest.

Block lists are numpy index arrays (`Blocks`) and the per-block counters numpy arrays: an agent session
re-hits and re-frees its whole context every turn, thousands of blocks, so touching and freeing must be
a few vectorised operations rather than a Python loop per block.

The free queue is an array with lazy deletion instead of vLLM's doubly linked list: a cache hit on a
free block only raises its reference count and leaves its queue entry behind. A free block's
`_entry_at` is the position of its one live entry, a referenced block's is -1, so an entry at position p
is live exactly when `_entry_at[queue[p]] == p`; allocation scans from the head in vectorised chunks and
skips the rest.

Re-finding a session's context: a request that lets go of its blocks leaves a `BlockRun` (its cached
blocks and their generations, renewed whenever a block is allocated). The session's next request checks
that run with two array reads instead of one hash-map lookup per block, and asks the map only from the
first block that was evicted since; the answer is the same as the map's (see `lookup`).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Blocks = npt.NDArray[np.intp]
"""Block indices, in a request's order."""

NO_BLOCKS: Blocks = np.empty(0, np.intp)
NO_BLOCKS.flags.writeable = False  # shared by every request without blocks

_QUEUE_SLOTS_PER_BLOCK = 4
"""Queue capacity in entries per block; a full queue is compacted to its live entries (≤ one per block)."""

_MIN_SCAN = 64
"""Fewest queue entries one allocation scan step looks at (most are skipped hits when the cache is hot)."""


@dataclass(frozen=True, slots=True)
class BlockRun:
    """A request's cached blocks as it let go of them (finished or preempted): a guess for the next
    lookup of the same context, checked block by block when used."""

    blocks: Blocks
    """blocks[i] was cached under hashes[i] (or was a duplicate that never got a hash)."""
    generations: npt.NDArray[np.int64]
    """Each block's allocation serial at that moment; a change means it was evicted since."""
    hashes: list[int]


class BlockPool:
    """Fixed number of KV blocks identified by index."""

    def __init__(self, num_blocks: int) -> None:
        self.num_blocks = num_blocks
        self._refs = np.zeros(num_blocks, np.int32)
        self._block_hash: list[int | None] = [None] * num_blocks
        self._has_hash = np.zeros(num_blocks, np.bool_)  # block_hash[b] is not None, as an array
        self._generation = np.zeros(num_blocks, np.int64)  # the allocation that last took each block
        self._allocations = 0
        self._cached: dict[int, int] = {}  # block hash -> block index
        self._queue = np.empty(_QUEUE_SLOTS_PER_BLOCK * num_blocks, np.intp)
        self._queue[:num_blocks] = np.arange(num_blocks)
        self._entry_at = np.arange(num_blocks, dtype=np.intp)
        self._positions = np.arange(len(self._queue), dtype=np.intp)
        self._head = 0
        self._tail = num_blocks
        self._num_free = num_blocks

    @property
    def num_free(self) -> int:
        return self._num_free

    @property
    def num_cached(self) -> int:
        return len(self._cached)

    def usage(self) -> float:
        return 1.0 - self._num_free / self.num_blocks

    def lookup(self, hashes: list[int], max_blocks: int, guess: BlockRun | None = None) -> Blocks:
        """Blocks holding the longest cached prefix of `hashes` (at most `max_blocks`); touches nothing.

        With `guess`, its blocks are taken as hits as far as its chain agrees with `hashes` and none of
        them has been allocated since or lacks a hash (a duplicate never got one, and only allocation
        changes a block's hash), so each still carries its hash and is exactly the block the hash map
        would give. Chained hashes agree on a prefix, so bisecting finds how far the chains agree.
        """
        held = 0
        if guess is not None:
            old = guess.hashes
            known = min(len(guess.blocks), max_blocks, len(hashes))
            agree = bisect_left(range(known), True, key=lambda i: hashes[i] != old[i])
            blocks = guess.blocks[:agree]
            lost = (self._generation[blocks] != guess.generations[:agree]) | ~self._has_hash[blocks]
            evicted = lost.nonzero()[0]
            held = int(evicted[0]) if len(evicted) else agree
        found = list(map(self._cached.get, hashes[held:max_blocks]))
        if None in found:
            del found[found.index(None) :]
        if held == 0:
            return np.array(found, dtype=np.intp)
        reused = guess.blocks[:held]  # type: ignore[union-attr]
        return np.concatenate((reused, np.array(found, dtype=np.intp))) if found else reused

    def run(self, blocks: Blocks, hashes: list[int]) -> BlockRun:
        """A `BlockRun` of `blocks` (a request's full, cached blocks), cached under `hashes`."""
        return BlockRun(blocks, self._generation[blocks], hashes)

    def count_free(self, blocks: Blocks) -> int:
        """How many of `blocks` are unreferenced (touching them would take them off the free queue)."""
        return int(np.count_nonzero(self._refs[blocks] == 0))

    def touch(self, blocks: Blocks) -> None:
        """Take a reference on each of `blocks` (distinct cache hits); free ones stop being free."""
        self._num_free -= self.count_free(blocks)
        self._refs[blocks] = self._refs[blocks] + 1  # `+=` on an index array is several times slower
        self._entry_at[blocks] = -1

    def allocate(self, count: int) -> Blocks:
        """Take `count` blocks from the free queue's head, evicting their cached hashes."""
        if count > self._num_free:
            raise RuntimeError(f"allocating {count} blocks with {self._num_free} free")
        if count <= 0:
            return NO_BLOCKS
        queue, entry_at, positions = self._queue, self._entry_at, self._positions
        parts: list[Blocks] = []
        pos, needed, scan = self._head, count, max(4 * count, _MIN_SCAN)
        while needed:  # every free block has one live entry in [head, tail), so this ends before tail
            end = min(self._tail, pos + scan)
            scan *= 2  # long runs of skipped entries (hits) are common: look further each time
            chunk = queue[pos:end]
            live = (entry_at[chunk] == positions[pos:end]).nonzero()[0][:needed]
            if len(live) == needed:
                parts.append(chunk[live])
                pos += int(live[-1]) + 1
                break
            if len(live):
                parts.append(chunk[live])
                needed -= len(live)
            pos = end
        self._head = pos
        blocks = parts[0] if len(parts) == 1 else np.concatenate(parts)
        self._refs[blocks] = 1
        entry_at[blocks] = -1
        self._allocations += 1
        self._generation[blocks] = self._allocations  # a plain store: `+= 1` on an index array is slow
        self._has_hash[blocks] = False
        block_hash, cached = self._block_hash, self._cached
        for block in blocks.tolist():
            old = block_hash[block]
            if old is not None:
                del cached[old]
                block_hash[block] = None
        self._num_free -= count
        return blocks

    def cache_blocks(self, blocks: Blocks, hashes: Sequence[int], start: int, end: int) -> None:
        """Register blocks[start:end] (now full and computed) under hashes[start:end].

        A hash already served by another block keeps that block; the duplicate stays uncached, like
        vLLM's handling of two requests computing the same prefix in the same step. Callers never
        register a block twice, so a block whose hash is not in the map has no hash yet.
        """
        cached, block_hash, has_hash = self._cached, self._block_hash, self._has_hash
        for digest, block in zip(hashes[start:end], blocks[start:end].tolist()):
            if digest not in cached:
                cached[digest] = block
                block_hash[block] = digest
                has_hash[block] = True

    def free(self, blocks: Blocks) -> None:
        """Drop one reference from each (distinct) block; those reaching 0 join the tail, last block first."""
        left = self._refs[blocks] - 1
        self._refs[blocks] = left
        released = blocks[left == 0][::-1]
        count = len(released)
        if not count:
            return
        if self._tail + count > len(self._queue):
            self._compact()
        tail = self._tail
        self._queue[tail : tail + count] = released
        self._entry_at[released] = self._positions[tail : tail + count]
        self._tail = tail + count
        self._num_free += count

    def _compact(self) -> None:
        """Keep only live entries, in order, at the front (at most one per block, so room is left)."""
        head, tail = self._head, self._tail
        chunk = self._queue[head:tail]
        live = chunk[self._entry_at[chunk] == self._positions[head:tail]]
        self._queue[: len(live)] = live
        self._entry_at[live] = self._positions[: len(live)]
        self._head, self._tail = 0, len(live)
