"""Snapshots a fuzzer found the planner failing on (session 27: 42,503 wild but valid snapshots, up to 400
sessions x 16 nodes, quanta of 1-4096 tokens, capacities and contexts up to the 2^40 tokens a snapshot
allows), each shrunk to a few sessions, in tests/planner/fuzzed/:
- `alike-of-no-sessions`: the K level's classes of alike sessions over a sub-problem with none left
  (IndexError);
- `knapsack-no-free-item-huge-room`: a room of 68 billion quanta whose knapsack fixed every item, and then
  allocated an array as long as the room (MemoryError; 23 GB and a minute on the 260 x 16 original);
- `dp-fills-huge-room`: the DP's suffix fills, a table as long as a room of 6.7 billion quanta (50 GiB);
- `subset-sum-huge-session-small-rooms`: a session of 2^32 quanta beside rooms of 11: every subset-sum
  bitset was shifted by its size before the mask, a 4-billion-bit int per shift (16 s a plan; 205 s on a
  117 x 9 one);
- `interrupt-used-below-holders`: a node reporting fewer used tokens than its holders reserve; releasing
  one counted its whole reservation as freed, and a session larger than the node was admitted (the
  overdue rule, policies/aging.py, did the same: tests/planner/test_wild_snapshots.py found it);
- `knapsack-kernel-huge-room`: one node of 2^40 tokens, so the K level's knapsack, its search given up,
  ran its DP over 69 billion quanta (MemoryError; the second fuzzing round, after the fixes above).
Each is planned without an error, and the plan passes test_wild_snapshots' checks (every node within its
room, admissions and interrupts of the right sessions, the bound holding).
Listing the ways to fill a room (planner/packing/bins.py) also once took 10-54 s a plan on such snapshots, on
a path only a busy machine's wall-clock deadline took; its step budget is tested on its own below.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tao_harness.config import PlannerConfig
from tao_harness.planner.packing.bins import maximal_contents
from tao_harness.planner.packing.split import with_item
from tao_harness.policies.tao import TaoPolicy
from tao_harness.types import Snapshot

from test_wild_snapshots import assert_plan_holds

FOLDER = Path(__file__).with_name("fuzzed")
NAMES = sorted(path.stem for path in FOLDER.glob("*.json"))


def test_the_folder_holds_the_six_cases() -> None:
    assert len(NAMES) == 6


@pytest.mark.parametrize("name", NAMES)
def test_a_fuzzed_snapshot_is_planned_within_every_room(name: str) -> None:
    snapshot = Snapshot.from_json(json.loads((FOLDER / f"{name}.json").read_text()))
    assert_plan_holds(snapshot, TaoPolicy(PlannerConfig(deadline_clock="cpu")).plan(snapshot))


def test_an_item_past_the_bitset_adds_nothing_without_being_shifted() -> None:
    mask = (1 << 12) - 1
    assert with_item(0b101, 2, mask) == 0b10101
    assert with_item(0b101, 12, mask) == 0b101
    # shifted first, this would build a 2^40-bit int (~137 GB)
    assert with_item(0b101, 1 << 40, mask) == 0b101


def test_listing_the_ways_to_fill_a_room_gives_up_past_its_step_budget() -> None:
    """A room that one large session fills alone or forty small ones of different sizes together: two
    maximal fillings, but 2^40 subsets of the small ones that are not (each tried before being dropped)."""
    size = [10_000, *range(1, 41)]
    fits = sorted(range(len(size)), key=lambda i: -size[i])
    assert maximal_contents(fits, size, {i: i for i in fits}, 10_000, 200) is None
    few = [10_000, *range(1, 9)]
    fits = sorted(range(len(few)), key=lambda i: -few[i])
    assert maximal_contents(fits, few, {i: i for i in fits}, 10_000, 200) == [[0], [8, 7, 6, 5, 4, 3, 2, 1]]
