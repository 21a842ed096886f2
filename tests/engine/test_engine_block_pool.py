"""Block pool and hashing mechanics: lazy LRU, reverse-order freeing, touch, incremental chained hashes."""

from __future__ import annotations

import random

import numpy as np
import pytest

from tao_harness.engine.block_pool import BlockPool, BlockRun
from tao_harness.engine.hashing import SessionHashMemo, common_prefix_blocks, extend_block_hashes


def _hashes(tokens: list[int], block_size: int = 4) -> list[int]:
    return extend_block_hashes(tokens, block_size, [])


def _blocks(*blocks: int) -> np.ndarray:
    return np.array(blocks, dtype=np.intp)


def _computed_and_freed(pool: BlockPool, count: int) -> tuple[list[int], list[int]]:
    """Allocate `count` blocks, cache them as one request's prompt (block size 4), free them."""
    blocks = pool.allocate(count)
    hashes = _hashes(list(range(4 * count)))
    pool.cache_blocks(blocks, hashes, 0, count)
    pool.free(blocks)
    return blocks.tolist(), hashes


def test_allocation_pops_the_head_and_drops_its_hash_only_then() -> None:
    pool = BlockPool(4)
    blocks, hashes = _computed_and_freed(pool, 2)
    assert pool.num_free == 4
    assert pool.lookup(hashes, 2).tolist() == blocks  # freed but still cached
    pool.allocate(2)  # the two never-used blocks sit at the head
    assert pool.lookup(hashes, 2).tolist() == blocks
    pool.allocate(1)  # now the freed request's tail block (freed first) is evicted
    assert pool.lookup(hashes, 2).tolist() == [blocks[0]]
    assert pool.num_cached == 1


def test_a_request_is_freed_tail_first_so_its_head_survives_longest() -> None:
    pool = BlockPool(3)
    blocks, hashes = _computed_and_freed(pool, 3)
    evicted_first = pool.allocate(1)
    assert evicted_first.tolist() == [blocks[2]]
    assert pool.lookup(hashes, 3).tolist() == blocks[:2]


def test_touch_takes_hits_out_of_the_free_queue_and_counts_references() -> None:
    pool = BlockPool(3)
    blocks = _blocks(*_computed_and_freed(pool, 2)[0])
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
    assert pool.lookup(hashes, 3).tolist() == blocks[:1].tolist()


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
    a, b, c, d = pool.allocate(4).tolist()
    pool.free(_blocks(a))
    pool.free(_blocks(b))
    pool.touch(_blocks(a))  # a hit on a free block takes it out of the queue ...
    pool.free(_blocks(a))  # ... and freeing it again puts it behind b
    for _ in range(40):  # many hits without allocations force the queue to compact
        pool.touch(_blocks(b, a))
        pool.free(_blocks(b, a))  # freed in reverse: a, then b
    pool.free(_blocks(c, d))  # d, then c
    assert pool.num_free == 4
    assert pool.allocate(4).tolist() == [a, b, d, c]


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


def test_a_guessed_run_gives_what_the_hash_map_gives_after_evictions_and_duplicates() -> None:
    pool = BlockPool(12)
    hashes = _hashes(list(range(4 * 6)))
    blocks = pool.allocate(6)
    pool.cache_blocks(blocks, hashes, 0, 6)
    run = pool.run(blocks, hashes)
    pool.free(blocks)
    assert pool.lookup(hashes, 6, run).tolist() == blocks.tolist()
    taken = pool.allocate(6 + 2)  # the six never-used blocks, then the run's last two (freed first)
    pool.cache_blocks(taken, _hashes(list(range(100, 132))), 0, 8)  # those two now carry other hashes
    assert pool.lookup(hashes, 6, run).tolist() == blocks[:4].tolist() == pool.lookup(hashes, 6).tolist()

    # A second copy of a cached prefix stays uncached (a duplicate): a run of it must not claim hits.
    duplicate = pool.allocate(1)
    pool.cache_blocks(duplicate, hashes, 0, 1)
    assert pool.lookup(hashes, 1, pool.run(duplicate, hashes)).tolist() == blocks[:1].tolist()


def test_guessed_lookups_match_plain_lookups_under_random_traffic() -> None:
    rng = random.Random(3)
    pool = BlockPool(40)
    chains = [_hashes([k] * 4 + list(range(4 * 12))) for k in range(3)]  # three sessions, 13 blocks each
    runs: list[BlockRun | None] = [None, None, None]
    for _ in range(300):
        k = rng.randrange(3)
        want = rng.randint(1, 13)
        hits = pool.lookup(chains[k], want, runs[k])
        assert hits.tolist() == pool.lookup(chains[k], want).tolist()
        if want - len(hits) > pool.num_free - pool.count_free(hits):
            continue
        pool.touch(hits)
        held = np.concatenate((hits, pool.allocate(want - len(hits))))
        pool.cache_blocks(held, chains[k], len(hits), want)
        runs[k] = pool.run(held, chains[k])
        pool.free(held)


def test_a_finished_requests_tokens_are_handed_on_only_to_a_prompt_that_extends_them() -> None:
    memo = SessionHashMemo(capacity=4, block_size=4)
    tokens = list(range(10))  # two full blocks and a partial one
    memo.remember("s", tokens, _hashes(tokens))
    longer = [*range(10), 10, 11, 12]
    assert memo.adopt_tokens("s", longer, _hashes(longer)) is None  # its request has not finished
    leftover = BlockPool(1).run(np.empty(0, np.intp), _hashes(tokens))
    memo.settle("s", tokens, leftover)
    forked = [*range(9), 99, 10]  # differs inside the partial block, which no hash covers
    assert memo.adopt_tokens("s", forked, _hashes(forked)) is None and tokens == list(range(10))
    adopted = memo.adopt_tokens("s", longer, _hashes(longer))
    assert adopted is tokens and tokens == longer
    assert memo.adopt_tokens("s", longer, _hashes(longer)) is None  # now owned by the new request
