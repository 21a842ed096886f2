"""Block pool and hashing mechanics: lazy LRU, reverse-order freeing, touch, incremental chained hashes."""

from __future__ import annotations

import random

import pytest

from tao_harness.engine.block_pool import BlockPool
from tao_harness.engine.hashing import SessionHashMemo, common_prefix_blocks, extend_block_hashes


def _hashes(tokens: list[int], block_size: int = 4) -> list[int]:
    return extend_block_hashes(tokens, block_size, [])


def _computed_and_freed(pool: BlockPool, count: int) -> tuple[list[int], list[int]]:
    """Allocate `count` blocks, cache them as one request's prompt (block size 4), free them."""
    blocks = pool.allocate(count)
    hashes = _hashes(list(range(4 * count)))
    pool.cache_blocks(blocks, hashes, 0, count)
    pool.free(blocks)
    return blocks, hashes


def test_allocation_pops_the_head_and_drops_its_hash_only_then() -> None:
    pool = BlockPool(4)
    blocks, hashes = _computed_and_freed(pool, 2)
    assert pool.num_free == 4
    assert pool.lookup(hashes, 2) == blocks  # freed but still cached
    pool.allocate(2)  # the two never-used blocks sit at the head
    assert pool.lookup(hashes, 2) == blocks
    pool.allocate(1)  # now the freed request's tail block (freed first) is evicted
    assert pool.lookup(hashes, 2) == [blocks[0]]
    assert pool.num_cached == 1


def test_a_request_is_freed_tail_first_so_its_head_survives_longest() -> None:
    pool = BlockPool(3)
    blocks, hashes = _computed_and_freed(pool, 3)
    evicted_first = pool.allocate(1)
    assert evicted_first == [blocks[2]]
    assert pool.lookup(hashes, 3) == blocks[:2]


def test_touch_takes_hits_out_of_the_free_queue_and_counts_references() -> None:
    pool = BlockPool(3)
    blocks, _ = _computed_and_freed(pool, 2)
    assert pool.count_free(blocks) == 2
    pool.touch(blocks)
    pool.touch(blocks[:1])
    assert pool.num_free == 1 and pool.usage() == pytest.approx(2 / 3)
    pool.free(blocks)
    assert pool.num_free == 2  # the shared first block still has a reference
    pool.free(blocks[:1])
    assert pool.num_free == 3


def test_lookup_stops_at_the_first_miss() -> None:
    pool = BlockPool(4)
    blocks = pool.allocate(3)
    hashes = _hashes(list(range(12)))
    pool.cache_blocks(blocks, hashes, 0, 1)
    pool.cache_blocks(blocks, hashes, 2, 3)  # block 1 never cached: block 2 is unreachable
    assert pool.lookup(hashes, 3) == blocks[:1]


def test_hash_chain_extends_incrementally_and_depends_on_the_whole_prefix() -> None:
    rng = random.Random(7)
    tokens = [rng.randrange(50_000) for _ in range(103)]
    partial = extend_block_hashes(tokens[:37], 16, [])
    assert len(partial) == 2
    assert extend_block_hashes(tokens, 16, partial) == _hashes(tokens, 16)
    changed = [tokens[0] + 1, *tokens[1:]]
    assert not set(_hashes(changed, 16)) & set(_hashes(tokens, 16))


def test_common_prefix_blocks_finds_the_first_differing_block() -> None:
    a = list(range(100))
    b = list(range(100))
    b[45] = -1
    assert common_prefix_blocks(a, b, 16, 10) == 2
    assert common_prefix_blocks(a, a, 16, 10) == 6
    assert common_prefix_blocks(a, a, 16, 3) == 3


def test_session_memo_reuses_only_the_shared_prefix_and_forgets_old_sessions() -> None:
    memo = SessionHashMemo(capacity=1, block_size=4)
    first = list(range(20))
    memo.remember("s", first, _hashes(first))
    follow_up = first[:10] + [99] * 10
    assert memo.reusable_hashes("s", follow_up) == _hashes(first)[:2]
    assert memo.reusable_hashes("other", follow_up) == []
    memo.remember("t", follow_up, _hashes(follow_up))
    assert memo.reusable_hashes("s", first) == []  # evicted: capacity 1


def test_a_block_freed_again_is_ordered_by_its_latest_free_even_after_compaction() -> None:
    pool = BlockPool(4)
    a, b, c, d = pool.allocate(4)
    pool.free([a])
    pool.free([b])
    pool.touch([a])  # a hit on a free block takes it out of the queue ...
    pool.free([a])  # ... and freeing it again puts it behind b
    for _ in range(40):  # many hits without allocations force the queue to compact
        pool.touch([b, a])
        pool.free([b, a])  # freed in reverse: a, then b
    pool.free([c, d])  # d, then c
    assert pool.num_free == 4
    assert pool.allocate(4) == [a, b, d, c]


def test_hash_chains_do_not_depend_on_the_interpreters_hash_seed() -> None:
    import os
    import subprocess
    import sys

    from tao_harness.engine import hashing

    # Load hashing.py alone (no package import) so two interpreter starts stay cheap.
    code = (
        "import importlib.util as u; s = u.spec_from_file_location('h', {path!r}); m = u.module_from_spec(s);"
        " s.loader.exec_module(m); print(m.extend_block_hashes(list(range(64)), 16, []))"
    ).format(path=hashing.__file__)
    seen = {
        subprocess.run(
            [sys.executable, "-I", "-c", code], env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True, text=True, check=True,
        ).stdout
        for seed in ("1", "2")
    }
    assert seen == {f"{_hashes(list(range(64)), 16)}\n"}
