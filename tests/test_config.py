from __future__ import annotations

from pathlib import Path

import pytest

from tao_harness.config import ConfigError, load_config


def test_defaults_match_the_paper() -> None:
    config = load_config(environ={})
    assert config.planner.half_life_s == 10
    assert config.readiness.horizon_s == 1
    assert config.readiness.refresh_s == 30
    assert config.readiness.delta == 0.2
    assert config.readiness.default_s == 5
    assert config.planner.reserve_tokens == 512


def test_precedence_file_env_flags(tmp_path: Path) -> None:
    path = tmp_path / "tao.toml"
    path.write_text('[store]\nurl = "sqlite:///file.db"\n[planner]\nquantum_tokens = 128\n')
    assert load_config(path, environ={}).store.url == "sqlite:///file.db"
    assert load_config(path, environ={"TAO_DB_URL": "sqlite:///env.db"}).store.url == "sqlite:///env.db"
    flagged = load_config(path, {"store.url": "sqlite:///flag.db"}, environ={"TAO_DB_URL": "sqlite:///env.db"})
    assert flagged.store.url == "sqlite:///flag.db"
    assert flagged.planner.quantum_tokens == 128


def test_yaml_and_errors_name_the_field(tmp_path: Path) -> None:
    path = tmp_path / "tao.yaml"
    path.write_text("readiness:\n  horizon_s: 2.5\n")
    config = load_config(path, environ={})
    assert config.readiness.horizon_s == 2.5 and config.planner.horizon_s == 2.5
    path.write_text("readiness:\n  delta: 3\n")
    with pytest.raises(ConfigError, match="readiness.delta"):
        load_config(path, environ={})
    path.write_text("planner: [1, 2\n")
    with pytest.raises(ConfigError, match="not valid"):
        load_config(path, environ={})
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.toml", environ={})


@pytest.mark.parametrize("value", ["inf", "-inf", "nan"])
def test_a_number_that_is_not_finite_is_refused_naming_the_field(tmp_path: Path, value: str) -> None:
    # max_wait_s = inf passed, then every plan failed on its snapshot; no bound is null, as documented
    path = tmp_path / "tao.toml"
    path.write_text(f"[planner]\nmax_wait_s = {value}\n")
    with pytest.raises(ConfigError, match="planner.max_wait_s: Input should be a finite number"):
        load_config(path, environ={})
    unbounded = tmp_path / "tao.yaml"
    unbounded.write_text("planner:\n  max_wait_s: null\n")
    assert load_config(unbounded, environ={}).planner.max_wait_s is None
