"""The emulated replica against real vLLM 0.32: one request set, compared shape by shape.

Both sides get the same requests (`tao_harness.replica.conformance.probe`): the reasoning requests go to
a server with a reasoning parser and without `--enable-prompt-tokens-details` (real: `vllm_dp2`), the
rest to one with the flag and no parser (real: `vllm_single`). What differs is either fixed in the
replica or listed in `conformance.DELIBERATE_DIFFERENCES` with its reason. The real shapes are also kept
in tests/replica/vllm_0_32_shapes.json, so the fast suite holds the replica to them without vLLM; this
test checks that file still says what the real servers say.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tao_harness.replica.conformance import comparable, emulated_settings, probe
from tao_harness.replica.app import build_app
from tao_harness.replica.scenario import load_scenario

pytestmark = pytest.mark.real_vllm
RECORDED = Path(__file__).resolve().parents[1] / "replica" / "vllm_0_32_shapes.json"


async def test_replica_answers_in_real_vllms_shapes(vllm_single: Any, vllm_dp2: Any, serve: Any) -> None:
    real = await probe(vllm_single.base_url, vllm_single.model, vllm_dp2.base_url)
    assert comparable(json.loads(RECORDED.read_text())) == comparable(real), (
        f"real vLLM's shapes changed: re-record {RECORDED.name} (python -m tao_harness.replica.conformance)")
    plain, thinking = [await serve(build_app(settings, load_scenario("swe-short")))
                       for settings in emulated_settings(vllm_single.model)]
    emulated = await probe(_url(plain), vllm_single.model, _url(thinking))
    assert comparable(emulated) == comparable(real)


def _url(server: Any) -> str:
    return str(server.make_url("")).rstrip("/")
