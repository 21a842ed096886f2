"""The real mini-SWE-agent (`make agents`: .tools/mini) under the stdlib launcher, without an LLM.

Its events go to a real relay whose forwarder has no coordinator, so they end up in the spool file,
which is read back.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from tao_harness.shims.claude_code.hooks import ClaudeHookTranslator
from tao_harness.serving import start_site
from tao_harness.shims.forwarder import Forwarder
from tao_harness.shims.mini_swe_agent.launch import install_launcher
from tao_harness.shims.relay import RelayState, SessionInfo, build_relay_app
from tao_harness.shims.spool import SpoolWriter, claim

REPO = Path(__file__).resolve().parents[2]
MINI_PYTHON = REPO / ".tools" / "mini" / "bin" / "python"

pytestmark = [pytest.mark.e2e]


REAL_SCRIPT = """
import json
from minisweagent.environments import get_environment
from minisweagent.exceptions import Submitted
from minisweagent.models import get_model
env = get_environment({"environment_class": "local", "timeout": 7})
env.execute({"command": "sleep 0.3"})
try:
    env.execute({"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"})
except Submitted:
    pass
model = get_model(config={"model_name": "openai/m", "model_kwargs": {"extra_headers": {"X-Mine": "1"}}})
import os
print(json.dumps({"kwargs": model.config.model_kwargs, "pythonpath": os.environ.get("PYTHONPATH")}))
"""


@pytest.mark.skipif(not MINI_PYTHON.exists(), reason="mini-SWE-agent is not installed (make agents)")
async def test_real_mini_swe_agent_under_the_launcher(tmp_path: Path) -> None:
    script = tmp_path / "agent.py"
    script.write_text(REAL_SCRIPT)
    spool = SpoolWriter(tmp_path / "spool")
    forwarder = Forwarder(None, spool, 100, 1.0)
    forwarder.start()
    state = RelayState(forwarder, SessionInfo("real-1", "mini-swe-agent", {}, 0.0), ClaudeHookTranslator("real-1"))
    relay, relay_root = await start_site(build_relay_app(state))
    relay_url = relay_root + state.prefix
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "MSWEA_CONFIGURED": "true",
           "TAO_RELAY_URL": relay_url, "TAO_SESSION": "real-1", "TAO_PROXY_URL": "http://127.0.0.1:5555",
           "PYTHONPATH": str(install_launcher(tmp_path / "launcher")), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    process = await asyncio.create_subprocess_exec(
        str(MINI_PYTHON), "-m", "tao_mswea_launch", str(script), env=env, cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:  # minutes: importing litellm on a loaded box; within the suite's per-test limit (300 s)
        out, err = await asyncio.wait_for(process.communicate(), timeout=200)
    finally:
        if process.returncode is None:
            process.kill()
    await relay.cleanup()
    await forwarder.close(0.1)
    assert process.returncode == 0, err.decode()
    claimed = claim(spool.path)
    assert claimed is not None
    calls: dict[str, list[dict]] = {}
    for record in claimed.records:
        calls.setdefault(record.body["call_id"], []).append(record.body)
    result = json.loads(out.decode().strip().splitlines()[-1])
    assert result["kwargs"]["api_base"] == "http://127.0.0.1:5555/v1"
    assert result["kwargs"]["extra_headers"] == {"X-Mine": "1", "X-TAO-Session": "real-1"}
    assert result["pythonpath"] is None  # the agent's tools do not inherit the launcher's path
    sleep_call, submit_call = sorted(calls.values(), key=lambda c: c[0]["at"])
    assert all(e["session"] == "real-1" for c in calls.values() for e in c)
    assert sleep_call[0]["command"] == "sleep 0.3" and sleep_call[0]["env_timeout_s"] == 7.0
    assert sleep_call[1]["duration_s"] == pytest.approx(0.3, abs=0.25)
    assert (sleep_call[1]["status"], sleep_call[1]["exit_code"]) == ("ok", 0)
    assert (submit_call[1]["status"], submit_call[1]["exit_code"]) == ("ok", 0)
