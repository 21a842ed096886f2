"""Fill command templates with names that look like a real repository, so family keys and hints are realistic.

A session draws one "world" (a repository for SWE-bench, a project for Terminal-Bench, a company for
AutomationBench) and every command of that session refers to it, the way a real trajectory keeps
touching the same files.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

# SWE-bench Lite / Verified draw from these 12 repositories (SWE-bench paper, Table 1).
_SWE_REPOS: tuple[tuple[str, str, str], ...] = (
    ("django", "django/db/models/query.py", "tests/queries/tests.py"),
    ("sympy", "sympy/core/expr.py", "sympy/core/tests/test_expr.py"),
    ("astropy", "astropy/units/quantity.py", "astropy/units/tests/test_quantity.py"),
    ("matplotlib", "lib/matplotlib/axes/_base.py", "lib/matplotlib/tests/test_axes.py"),
    ("scikit-learn", "sklearn/utils/validation.py", "sklearn/utils/tests/test_validation.py"),
    ("sphinx", "sphinx/ext/autodoc/__init__.py", "tests/test_ext_autodoc.py"),
    ("pytest", "src/_pytest/python.py", "testing/test_python.py"),
    ("xarray", "xarray/core/dataset.py", "xarray/tests/test_dataset.py"),
    ("requests", "requests/models.py", "tests/test_requests.py"),
    ("pylint", "pylint/checkers/base.py", "tests/checkers/unittest_base.py"),
    ("seaborn", "seaborn/_core/scales.py", "tests/_core/test_scales.py"),
    ("flask", "src/flask/app.py", "tests/test_basic.py"),
)
_SYMBOLS = (
    "_filter_or_exclude",
    "as_real_imag",
    "to_value",
    "set_xlim",
    "check_array",
    "format_signature",
    "getfixtureinfo",
    "merge",
    "prepare_body",
    "visit_functiondef",
    "_setup",
    "make_response",
)
_PACKAGES = ("numpy", "requests", "flask", "pyyaml", "pandas", "scipy", "jinja2", "pytest", "cython")
_APT = ("build-essential", "cmake", "libssl-dev", "qemu-system-x86", "redis-server", "nginx", "sqlite3", "jq")
_TERMINAL_PROJECTS: tuple[tuple[str, str], ...] = (
    ("/app/server", "server.py"),
    ("/app/kernel", "init.c"),
    ("/app/pipeline", "train.py"),
    ("/app/solver", "main.rs"),
    ("/app/site", "index.js"),
    ("/app/db", "schema.sql"),
)
_MAKE_TARGETS = ("all", "test", "install", "check", "release")
# AutomationBench-style SaaS apps and their (read, write) endpoints.
_AUTOMATION_APIS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("crm", ("search_records", "get_record"), ("update_record", "create_note")),
    ("gmail", ("list_threads", "get_message"), ("send_email",)),
    ("sheets", ("get_rows", "find_row"), ("append_row", "update_row")),
    ("slack", ("search_messages", "list_channels"), ("post_message",)),
    ("calendar", ("list_events",), ("create_event",)),
    ("zendesk", ("list_tickets", "get_ticket"), ("update_ticket",)),
    ("quickbooks", ("list_invoices",), ("create_invoice",)),
    ("asana", ("list_tasks",), ("create_task", "update_task")),
)


@dataclass(frozen=True)
class World:
    """What one session's commands talk about."""

    fields: Mapping[str, str]
    """Placeholder name -> value for `str.format`."""


def draw_world(vocabulary: str, rng: np.random.Generator) -> World:
    """The names a session keeps using; `vocabulary` is a WorkloadSpec.vocabulary."""
    if vocabulary == "swe":
        repo, source, test = _SWE_REPOS[int(rng.integers(len(_SWE_REPOS)))]
        directory = source.rsplit("/", 1)[0]
        return World(
            {
                "repo": repo,
                "file": source,
                "test_file": test,
                "dir": directory,
                "script": "reproduce.py",
                "module": source.removesuffix(".py").replace("/", ".").removeprefix("src."),
            }
        )
    if vocabulary == "terminal":
        directory, main = _TERMINAL_PROJECTS[int(rng.integers(len(_TERMINAL_PROJECTS)))]
        return World(
            {
                "dir": directory,
                "file": f"{directory}/{main}",
                "script": f"{directory}/solve.py",
                "test_file": f"{directory}/tests/test_outputs.py",
            }
        )
    if vocabulary == "automation":
        return World({"company": f"co{int(rng.integers(1000)):03d}"})
    raise ValueError(f"unknown command vocabulary {vocabulary!r}")


def _nth(options: tuple[str, ...], u: float) -> str:
    return options[int(u * len(options))]


def call_fields(
    world: World, rng: np.random.Generator, sleep: int | None, limit: int | None
) -> dict[str, str]:
    """Placeholder values for one call: the session's world plus per-call names (symbol, package, lines)."""
    u = rng.random(10).tolist()  # one draw for all per-call names: generation is dominated by call overhead
    start = 1 + int(u[0] * 400)
    app, reads, writes = _AUTOMATION_APIS[int(u[1] * len(_AUTOMATION_APIS))]
    return {
        **world.fields,
        "symbol": _nth(_SYMBOLS, u[2]),
        "pkg": _nth(_PACKAGES, u[3]),
        "apt": _nth(_APT, u[4]),
        "target": _nth(_MAKE_TARGETS, u[5]),
        "start": str(start),
        "end": str(start + 20 + int(u[6] * 100)),
        "port": _nth(("3000", "5000", "8000", "8080"), u[7]),
        "app": app,
        "read": _nth(reads, u[8]),
        "write": _nth(writes, u[9]),
        "sleep": "" if sleep is None else str(sleep),
        "limit": "" if limit is None else str(limit),
    }
