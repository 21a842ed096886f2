"""The emulated replica answers in the shapes real vLLM 0.32 servers were recorded answering in.

vllm_0_32_shapes.json is `python -m tao_harness.replica.conformance URL tiny REASONING_URL` against real
vLLM 0.32 (CPU build, the tier's tiny model, the serve flags of tests/real_vllm: REASONING_URL with
`--reasoning-parser deepseek_r1` and without `--enable-prompt-tokens-details`); the real-vLLM tier
re-checks it live. Differences left on purpose are in `conformance.DELIBERATE_DIFFERENCES`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tao_harness.replica.app import build_app
from tao_harness.replica.conformance import DELIBERATE_DIFFERENCES, comparable, emulated_settings, probe
from tao_harness.replica.scenario import load_scenario

RECORDED = json.loads((Path(__file__).parent / "vllm_0_32_shapes.json").read_text())
MODEL = "tiny"  # the name the recorded servers were started with


async def test_every_probe_matches_the_recorded_real_server(serve: Any) -> None:
    plain, thinking = [await serve(build_app(s, load_scenario("swe-short"))) for s in emulated_settings(MODEL)]
    emulated = await probe(_url(plain), MODEL, _url(thinking))
    expected, actual = comparable(RECORDED), comparable(emulated)
    assert actual.keys() == expected.keys()
    mismatched = [name for name in expected if actual[name] != expected[name]]
    assert not mismatched, {name: (actual[name], expected[name]) for name in mismatched}


def test_the_deliberate_differences_are_few_and_explained() -> None:
    assert len(DELIBERATE_DIFFERENCES) <= 3 and all(len(reason) > 40 for reason in DELIBERATE_DIFFERENCES.values())


def _url(server: Any) -> str:
    return str(server.make_url("")).rstrip("/")
