"""The fault campaign of `tao bench live --faults`: scripted faults during small fleet runs, one table.

All faults run on one `tao` cluster in child processes (emulated replicas, coordinator with a history
database, proxy), the harmless ones first and the destructive ones last, so one cluster start serves
the whole campaign: malformed and adversarial input, clients hanging up mid-stream, the soak, shim events while the
coordinator is down, the proxy killed mid-stream, the scale soak (thousands of sessions, with cut
streams and a proxy kill), the coordinator killed mid-run, a replica killed mid-run. A fault script that
raises is reported as a failed row, and the campaign goes on.
"""

from __future__ import annotations

import json
import tempfile
import traceback
from pathlib import Path
from typing import Awaitable, Callable, Sequence

from tao_harness.fleet.faults import edges, inputs, proxy, runs, scale
from tao_harness.fleet.faults.cluster import ClusterSpec, FaultCluster, start_cluster
from tao_harness.fleet.faults.common import FaultRow, FaultSettings
from tao_harness.fleet.processes import ProcessGroup
from tao_harness.tables import format_table

FaultScript = Callable[[FaultCluster], Awaitable[list[FaultRow]]]
HEADERS = ("fault", "figure", "value", "goal", "met?")


def _scripts(settings: FaultSettings, db_path: str, scratch: Path) -> list[tuple[str, FaultScript]]:
    return [
        ("malformed input", lambda c: inputs.malformed_input(c, settings)),
        ("adversarial input", lambda c: edges.adversarial_input(c, settings)),
        ("clients hang up mid-stream", lambda c: runs.disconnects(c, settings)),
        ("soak", lambda c: runs.soak(c, settings)),
        ("shim events, coordinator down", lambda c: inputs.spooled_events(c, settings, db_path, scratch)),
        ("proxy killed", lambda c: proxy.proxy_kill(c, settings)),
        ("scale soak", lambda c: scale.scale_soak(c, settings)),
        ("coordinator killed", lambda c: runs.coordinator_restart(c, settings)),
        ("replica killed", lambda c: runs.replica_kill(c, settings, db_path)),
    ]


async def run_campaign(settings: FaultSettings, only: Sequence[str] = ()) -> list[FaultRow]:
    """Every fault (or those named in `only`) in order on one fresh cluster; the table's rows."""
    rows: list[FaultRow] = []
    with tempfile.TemporaryDirectory(prefix="tao-faults-") as scratch:
        db_path = str(Path(scratch) / "history.db")
        spec = ClusterSpec(settings.replicas, settings.time_scale, policy="tao", db_url=f"sqlite:///{db_path}")
        async with ProcessGroup() as processes:
            cluster = await start_cluster(spec, processes)
            for name, script in _scripts(settings, db_path, Path(scratch)):
                if only and name not in only:
                    continue
                try:
                    rows += await script(cluster)
                except Exception as exc:  # noqa: BLE001 - one broken fault script must not hide the others
                    last = traceback.format_exception_only(exc)[-1].strip()
                    rows.append(FaultRow(name, "fault script failed", float("nan"), "runs", False, last))
    return rows


def fault_names() -> list[str]:
    return [name for name, _ in _scripts(FaultSettings.ci(), "", Path())]


def _value(row: FaultRow) -> str:
    return f"{row.value:g}"


def table(rows: Sequence[FaultRow]) -> str:
    return format_table([(r.fault, r.figure, _value(r), r.goal, "yes" if r.met else "NO") for r in rows], HEADERS)


def write_report(rows: Sequence[FaultRow], settings: FaultSettings, out: Path) -> Path:
    """`faults.md` (table + details) and `faults.json` in `out`; returns the markdown path."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "faults.json").write_text(json.dumps({"settings": _settings_json(settings),
                                                 "rows": [r.to_json() for r in rows]}, indent=2) + "\n")
    met = sum(r.met for r in rows)
    lines = ["# Fault campaign", "", f"{met} of {len(rows)} goals met.", "",
             "| " + " | ".join(HEADERS) + " |", "|---" * len(HEADERS) + "|"]
    lines += [f"| {r.fault} | {r.figure} | {_value(r)} | {r.goal} | {'yes' if r.met else '**NO**'} |" for r in rows]
    lines += ["", "## Details", ""] + [f"- {r.fault} — {r.figure}: {r.detail}" for r in rows if r.detail]
    lines += ["", "Settings: `" + json.dumps(_settings_json(settings)) + "`"]
    path = out / "faults.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def _settings_json(settings: FaultSettings) -> dict[str, object]:
    return {name: getattr(settings, name) for name in FaultSettings.__dataclass_fields__}


def run_and_report(size: str, out: Path, as_json: bool, seed: int = 0) -> int:
    """`tao bench live --faults`: run, write `out/faults.md` + `faults.json`, print; 1 if a goal is missed."""
    import asyncio
    import dataclasses

    base = FaultSettings.full() if size == "full" else FaultSettings.ci()
    settings = dataclasses.replace(base, seed=seed)
    rows = asyncio.run(run_campaign(settings))
    path = write_report(rows, settings, out)
    if as_json:
        print(json.dumps([r.to_json() for r in rows], indent=2))
    else:
        print(table(rows))
        print(f"\n{sum(r.met for r in rows)} of {len(rows)} goals met; details in {path}")
    return 0 if all(r.met for r in rows) else 1
