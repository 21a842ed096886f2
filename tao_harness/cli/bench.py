"""`tao bench compare`: every policy on the same traces, one simulation per (workload, workers, policy).

(`tao bench live`, the routers over real HTTP, lives in `bench_live.py`; this module only registers it.)

Runs go to worker processes when `--jobs` > 1; each process rebuilds its trace from the (deterministic)
workload generator or re-reads the trace file, so only small job descriptions cross process boundaries.
A run that fails is reported in results.md and makes the exit code 1; the others still complete.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from tao_harness.cli.common import UsageError, gib_size, new_dir
from tao_harness.sim.report import BenchRun, BenchSettings
from tao_harness.sim.trace import TraceSession

# Task counts of the paper's runs: SWE-bench Lite 300, Verified 500, Terminal-Bench 2.0 89,
# AutomationBench 800, the mixed coding load 389.
PAPER_SESSIONS = {"swe-lite": 300, "swe-verified": 500, "terminal-bench": 89, "automation": 800, "mixed": 389}


@dataclass(frozen=True)
class BenchJob:
    """One simulation to run: where its trace comes from and the SimConfig fields that vary."""

    source: str
    """Workload name, or a trace file path when `is_file`."""
    is_file: bool
    sessions: int
    seed: int
    workers: int
    policy: str
    """The row's label: a registered policy or an ablation variant (`tao_harness.sim.variants`)."""
    replicas: int
    profile: str
    oracle_readiness: bool
    kv_offloading_size_gib: float | None = None
    config: Path | None = None

    @property
    def label(self) -> str:
        return Path(self.source).name if self.is_file else self.source


def _trace(source: str, is_file: bool, sessions: int, seed: int) -> tuple[TraceSession, ...]:
    # Rebuilt per job (deterministic, well under a second) instead of shipping traces between processes.
    if is_file:
        from tao_harness.sim.trace import read_trace

        return tuple(read_trace(source))
    from tao_harness.sim.workloads import generate

    return tuple(generate(source, sessions, seed))


def run_job(job: BenchJob) -> BenchRun:
    """Simulate one job; any failure becomes a BenchRun with `error` set (never raises)."""
    started = time.perf_counter()
    try:
        from tao_harness.sim.config import SimConfig, sim_sections
        from tao_harness.sim.simulator import simulate
        from tao_harness.sim.variants import variant

        row = variant(job.policy)
        config = SimConfig(
            policy=row.policy,
            replicas=job.replicas,
            workers=job.workers,
            profile=job.profile,
            seed=job.seed,
            # A row without tool events has nothing to predict: --oracle-readiness leaves it as it is.
            oracle_readiness=(job.oracle_readiness or row.oracle_readiness) and row.tool_events,
            tool_events=row.tool_events,
            kv_offloading_size_gib=job.kv_offloading_size_gib,
            **sim_sections(job.config, row.planner),
        )
        result = simulate(_trace(job.source, job.is_file, job.sessions, job.seed), config)
    except Exception as exc:  # noqa: BLE001 - one broken policy must not lose the other runs
        return BenchRun(
            job.label,
            job.workers,
            job.policy,
            None,
            wall_s=time.perf_counter() - started,
            error=f"{type(exc).__name__}: {exc}".splitlines()[0],
        )
    return BenchRun(
        job.label,
        job.workers,
        job.policy,
        result.metrics,
        result.timeline,
        result.ttft_samples,
        result.wait_samples,
        time.perf_counter() - started,
    )


def _run_all(jobs: Sequence[BenchJob], processes: int) -> Iterator[BenchRun]:
    if processes <= 1:
        yield from (run_job(job) for job in jobs)
        return
    # Spawned, not forked: a fork copies this process's threads' locks (HiGHS's worker pool among them,
    # once a TAO run has planned here) into children that can then wait on them forever.
    pool = ProcessPoolExecutor(max_workers=processes, mp_context=multiprocessing.get_context("spawn"))
    try:
        futures = [pool.submit(run_job, job) for job in jobs]
        yield from (future.result() for future in as_completed(futures))
    finally:  # on Ctrl-C or an error, do not wait for the queued simulations
        pool.shutdown(wait=False, cancel_futures=True)


def _int_list(text: str, flag: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UsageError(f"{flag} takes comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise UsageError(f"{flag} needs positive integers, got {text!r}")
    return sorted(set(values))


def _policies(text: str) -> list[str]:
    from tao_harness.policies.registry import policy_names
    from tao_harness.sim.variants import variant_names

    known = policy_names()
    if text == "all":
        return list(known)
    if text == "ablation":
        return list(variant_names())
    chosen = list(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))
    unknown = [p for p in chosen if p not in known and p not in variant_names()]
    if unknown or not chosen:
        raise UsageError(
            f"unknown policy {', '.join(map(repr, unknown)) or repr(text)}; "
            f"choose from: all, ablation, {', '.join(dict.fromkeys((*known, *variant_names())))}"
        )
    return chosen


def _sources(args: argparse.Namespace) -> list[tuple[str, bool, int]]:
    """(source, is_file, sessions) per trace to compare."""
    if args.trace is not None:
        from tao_harness.cli.trace import load_trace

        return [(str(args.trace), True, len(load_trace(args.trace)))]
    from tao_harness.sim.workloads import WORKLOADS

    names = [w.strip() for w in args.workload.split(",") if w.strip()]
    unknown = [w for w in names if w not in WORKLOADS]
    if unknown or not names:
        raise UsageError(
            f"unknown workload {', '.join(map(repr, unknown)) or repr(args.workload)}; "
            f"choose from: {', '.join(WORKLOADS)}"
        )
    if args.sessions is not None and args.sessions < 1:
        raise UsageError("--sessions must be at least 1")
    return [(name, False, args.sessions or PAPER_SESSIONS[name]) for name in names]


def build_jobs(args: argparse.Namespace) -> tuple[list[BenchJob], BenchSettings]:
    """Validate the options and expand them into jobs; UsageError on bad input."""
    from tao_harness.engine.profiles import PROFILES

    if args.profile not in PROFILES:
        raise UsageError(f"unknown profile {args.profile!r}; choose from: {', '.join(sorted(PROFILES))}")
    if args.replicas < 1 or args.jobs < 1 or args.seed < 0:
        raise UsageError("--replicas and --jobs must be at least 1, --seed at least 0")
    if args.config is not None:
        from tao_harness.cli.sim import config_sections

        config_sections(args.config)  # a bad file fails now, not in every worker process after it
    workers, policies, sources = (
        _int_list(args.workers, "--workers"),
        _policies(args.policies),
        _sources(args),
    )
    jobs = [
        BenchJob(
            source,
            is_file,
            sessions,
            args.seed,
            w,
            policy,
            args.replicas,
            args.profile,
            args.oracle_readiness,
            args.kv_offloading_size,
            args.config,
        )
        for source, is_file, sessions in sources
        for w in workers
        for policy in policies
    ]
    settings = BenchSettings(args.replicas, args.profile, args.seed, max(s for _, _, s in sources))
    return jobs, settings


def _collect(jobs: Sequence[BenchJob], args: argparse.Namespace, settings: BenchSettings) -> list[BenchRun]:
    """Run the jobs with a progress bar; the tables are rewritten after each run, so a stopped comparison
    keeps the rows it has."""
    from tqdm import tqdm

    from tao_harness.sim.report import write_tables

    position = {(j.label, j.workers, j.policy): i for i, j in enumerate(jobs)}
    runs: list[BenchRun] = []
    with tqdm(total=len(jobs), desc="simulating", unit="run", file=sys.stderr, disable=args.quiet) as bar:
        for run in _run_all(jobs, args.jobs):
            runs.append(run)
            runs.sort(
                key=lambda r: position[(r.workload, r.workers, r.policy)]
            )  # job order, not finish order
            write_tables(runs, settings, args.output)
            bar.set_postfix_str(f"{run.workload} w{run.workers} {run.policy}")
            bar.update()
    return runs


def cmd_compare(args: argparse.Namespace) -> int:
    from tao_harness.sim.report_plots import write_report

    jobs, settings = build_jobs(args)
    try:
        args.output.mkdir(exist_ok=True)  # fail before hours of simulation, not after
        runs = _collect(jobs, args, settings)
        files = write_report(runs, settings, args.output)
    except OSError as exc:
        raise UsageError(f"cannot write the report to {args.output}: {exc.strerror}") from None
    failed = [r for r in runs if r.error is not None]
    for run in failed:
        print(f"failed: {run.workload} {run.workers} workers {run.policy}: {run.error}", file=sys.stderr)
    print(f"wrote {len(files)} files to {args.output} ({len(runs) - len(failed)}/{len(runs)} runs ok)")
    return 1 if failed else 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    subs = parser.add_subparsers(dest="bench_command", metavar="SUBCOMMAND", required=True)
    compare = subs.add_parser(
        "compare",
        help="simulate every policy on the same traces; write results.md/csv and plots",
        description="Simulate policies on the same traces (paper Table 1 style).",
    )
    source = compare.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--workload",
        help="synthetic workload(s), comma-separated: swe-lite, swe-verified, "
        "terminal-bench, automation, mixed",
    )
    source.add_argument("--trace", type=Path, metavar="FILE", help="replay this trace file instead")
    compare.add_argument(
        "--workers", default="16,32,64", help="closed-loop worker counts, comma-separated (default 16,32,64)"
    )
    compare.add_argument(
        "--policies",
        default="all",
        help="'all' (every registered policy), 'ablation' (TAO with one part changed at a time: no "
        "readiness, oracle readiness, no cache credit, BFD, no wait bound, the paper's release rule; and "
        "ThunderAgent) or a comma-separated list of policies and ablation rows",
    )
    compare.add_argument("--kv-offloading-size", type=gib_size, metavar="GIB",
                         help="host KV tier per replica in GiB, as vLLM's --kv-offloading-size, the same for "
                              "every policy (default: none)")
    compare.add_argument("--config", type=Path, metavar="FILE",
                         help="config file whose planner, readiness and sessions sections every run uses")
    compare.add_argument("--replicas", type=int, default=2, metavar="N", help="engine replicas (default 2)")
    compare.add_argument(
        "--profile", default="qwen3-32b-2xh100", help="engine step-time profile (default qwen3-32b-2xh100)"
    )
    compare.add_argument(
        "--sessions",
        type=int,
        metavar="N",
        help="sessions per synthetic workload (default: the "
        "paper's task count: swe-lite 300, swe-verified 500, terminal-bench 89, automation 800, "
        "mixed 389)",
    )
    compare.add_argument(
        "--seed", type=int, default=0, metavar="S", help="seed for traces and the simulator (default 0)"
    )
    compare.add_argument(
        "--oracle-readiness", action="store_true", help="ablation: readiness knows true tool durations"
    )
    compare.add_argument(
        "-o",
        "--output",
        type=new_dir,
        required=True,
        metavar="DIR",
        help="directory for results.md, results.csv and the PNG plots",
    )
    compare.add_argument(
        "--jobs", type=int, default=1, metavar="J", help="simulations in parallel processes (default 1)"
    )
    compare.add_argument("--quiet", action="store_true", help="no progress bar")
    compare.set_defaults(_bench_run=cmd_compare)

    from tao_harness.cli import bench_live

    live_help = "the routers on the same trace over real HTTP against emulated replicas"
    live = subs.add_parser("live", help=live_help, description=live_help)
    bench_live.add_arguments(live)
    live.set_defaults(_bench_run=bench_live.run)


def run(args: argparse.Namespace) -> int:
    return int(args._bench_run(args))
