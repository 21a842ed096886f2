"""The explicit package list in pyproject.toml matches the packages on disk, and imports stay canonical."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _packages_on_disk() -> set[str]:
    package_dir = _pyproject()["tool"]["setuptools"]["package-dir"]
    roots = {"tao_harness": ROOT / "tao_harness"} | {name: ROOT / path for name, path in package_dir.items()}
    found: set[str] = set()
    for name, folder in roots.items():
        for init in folder.rglob("__init__.py"):
            if "node_modules" in init.parts:
                continue
            relative = init.parent.relative_to(folder).parts
            found.add(".".join((name, *relative)))
    return found


def test_package_list_matches_disk() -> None:
    declared = set(_pyproject()["tool"]["setuptools"]["packages"])
    assert declared == _packages_on_disk()


def test_no_top_level_store_or_shims_imports() -> None:
    # A top-level `import store` would load a second copy of the SQLAlchemy metadata.
    bad = re.compile(r"^\s*(from|import)\s+(store|shims)(\.|\s|$)", re.MULTILINE)
    offenders = [
        str(path.relative_to(ROOT))
        for folder in ("tao_harness", "shims", "store", "tests", "scripts")
        for path in (ROOT / folder).rglob("*.py")
        if bad.search(path.read_text())
    ]
    assert offenders == []


def test_importing_the_package_has_no_side_effects(tmp_path: Path) -> None:
    import subprocess
    import sys

    code = "import sys, tao_harness; print(sorted(m for m in sys.modules if m.startswith('tao_harness')))"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['tao_harness']"
    assert list(tmp_path.iterdir()) == []
