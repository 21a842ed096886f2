"""`tao bench live --kv-offloading-size`: the replicas get a host KV tier and TAO's planner its reload rate."""

from __future__ import annotations

from pathlib import Path

import pytest

from tao_harness.cli.main import main
from tao_harness.config import load_config
from tao_harness.fleet.bench import LiveBenchConfig
from tao_harness.fleet.routers import host_tier_flags


def test_the_planner_is_told_the_replicas_host_reload_rate(tmp_path: Path) -> None:
    config = LiveBenchConfig(("tao",), (4,), 2, 10.0, 8000, kv_offloading_size_gib=64.0)
    # Qwen3-32B's 256 KiB of KV per token over the 50 GB/s host link.
    assert config.host_tokens_per_s == pytest.approx(50e9 / (256 * 1024))
    assert LiveBenchConfig(("tao",), (4,), 2, 10.0, 8000).host_tokens_per_s is None
    flags = host_tier_flags(tmp_path, config.host_tokens_per_s)
    assert flags[0] == "--config"
    assert load_config(Path(flags[1])).planner.host_tokens_per_s == pytest.approx(config.host_tokens_per_s)
    assert host_tier_flags(tmp_path, None) == []


def test_a_bad_host_tier_size_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["bench", "live", "--router", "tao", "--kv-offloading-size", "-3"])
    assert exit_.value.code == 2
    assert "--kv-offloading-size" in capsys.readouterr().err
