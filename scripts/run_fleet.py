"""Run an agent over a task list with N concurrent `tao-run` sessions sharing one coordinator.

    python scripts/run_fleet.py --tasks tasks.txt -n 16 --replica r0=http://gpu0:8000 \\
        -- claude -p {task} --dangerously-skip-permissions --output-format json

Each line of the task file is one task; `{task}` in the command is replaced by it (and `{index}` by its
number). Without `--coordinator`, one embedded coordinator + proxy is started here for the whole fleet
(replicas from `--replica` / `--config`); every worker is a `tao-run --coordinator ... --proxy ...`
with its own session `<prefix>-<index>` and the label `task=<index>`. Prints one row per task.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from pathlib import Path
from typing import AsyncIterator

from tao_harness.cli.common import cluster_config_from_args
from tao_harness.tables import format_table


def _args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    cut = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=Path, required=True, help="task file, one task per line")
    parser.add_argument("-n", "--workers", type=int, default=8, help="concurrent sessions (default 8)")
    parser.add_argument("--coordinator", help="shared coordinator URL (default: start an embedded one)")
    parser.add_argument("--proxy", help="shared proxy URL (with --coordinator)")
    parser.add_argument("--replica", action="append", default=[], metavar="ID=URL[@RANK]",
                        help="replica for the embedded coordinator (repeatable)")
    parser.add_argument("--config", type=Path, help="TOML or YAML config file")
    parser.add_argument("--db", help="history database URL for the embedded coordinator")
    parser.add_argument("--session-prefix", default="fleet", help="session ids are PREFIX-INDEX")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv[:cut])
    command = argv[cut + 1:]
    if not command:
        parser.error("give the agent command after --")
    if args.workers < 1:
        parser.error("--workers must be at least 1")
    return args, command


@contextlib.asynccontextmanager
async def _coordinator(args: argparse.Namespace) -> AsyncIterator[tuple[str, str | None]]:
    if args.coordinator:
        yield args.coordinator, args.proxy
        return
    from tao_harness.coordinator.embedded import EmbeddedCluster

    config = cluster_config_from_args(args, {"store.url": args.db})
    async with EmbeddedCluster(config) as cluster:
        print(f"embedded coordinator {cluster.coordinator_url}, proxy {cluster.proxy_url}", file=sys.stderr)
        yield cluster.coordinator_url, cluster.proxy_url


async def _worker(index: int, task: str, command: list[str], args: argparse.Namespace, coordinator: str,
                  proxy: str | None, gate: asyncio.Semaphore) -> dict[str, object]:
    session = f"{args.session_prefix}-{index}"
    argv = [part.replace("{task}", task).replace("{index}", str(index)) for part in command]
    tao_run = [sys.executable, "-m", "tao_harness.cli.run", "--coordinator", coordinator,
               *(["--proxy", proxy] if proxy else []), "--session", session, "--labels", f"task={index}", "--"]
    async with gate:
        started = time.monotonic()
        process = await asyncio.create_subprocess_exec(*tao_run, *argv, stdin=asyncio.subprocess.DEVNULL,
                                                       stdout=asyncio.subprocess.DEVNULL)
        code = await process.wait()
    return {"task": index, "session": session, "exit_code": code, "seconds": time.monotonic() - started}


async def _main(args: argparse.Namespace, command: list[str]) -> list[dict[str, object]]:
    tasks = [line.strip() for line in args.tasks.read_text().splitlines() if line.strip()]
    gate = asyncio.Semaphore(args.workers)
    async with _coordinator(args) as (coordinator, proxy):
        return list(await asyncio.gather(*(_worker(i, task, command, args, coordinator, proxy, gate)
                                           for i, task in enumerate(tasks))))


def main(argv: list[str]) -> int:
    args, command = _args(argv)
    rows = asyncio.run(_main(args, command))
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(format_table([list(r.values()) for r in rows], ["task", "session", "exit code", "seconds"]))
    return 0 if all(r["exit_code"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
