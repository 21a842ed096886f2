"""`tao history accuracy`: the forecast beside the baselines, replayed over the stored calls in time order.

Tables: overall and per harness (MAE, share within tolerance, Brier score of the readiness answers,
bound coverage and median overshoot), the largest families, and the reliability table of the forecast's
P(return within H | elapsed). `--json` prints all of it (every family); `-o FILE.png` draws the
reliability diagram and the per-harness MAE. `--sessions` / `--exclude-sessions` restrict the replay to
session-id prefixes (e.g. leave out 1-second-resolution exports). `--folds K` splits the sessions into K
groups and replays each alone from an empty history (session-level cross-validation): one line per fold
and predictor, and with `--json` one full report per fold.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Iterator

from tao_harness.cli.common import new_file, open_history, print_json
from tao_harness.readiness.accuracy import CallSample, replay_accuracy, session_folds
from tao_harness.readiness.accuracy_report import AccuracyReport, GroupAccuracy
from tao_harness.store import queries
from tao_harness.tables import format_table

_TOP_FAMILIES = 12


def add_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("--sessions", action="append", default=[], metavar="PREFIX",
                         help="replay only sessions whose id starts with PREFIX (repeatable)")
    command.add_argument("--exclude-sessions", action="append", default=[], metavar="PREFIX",
                         help="leave out sessions whose id starts with PREFIX (repeatable)")
    command.add_argument("--folds", type=int, default=1, metavar="K",
                         help="replay K groups of whole sessions separately, each from an empty history")
    command.add_argument("-o", "--output", type=new_file, help="also draw the reliability diagram and MAEs (PNG)")


def selected(samples: Iterable[CallSample], include: list[str], exclude: list[str]) -> Iterator[CallSample]:
    """Samples of the sessions named by the prefixes (all when `include` is empty), minus `exclude`."""
    for sample in samples:
        if include and not sample.session_id.startswith(tuple(include)):
            continue
        if exclude and sample.session_id.startswith(tuple(exclude)):
            continue
        yield sample


def _group_rows(label: str, group: GroupAccuracy) -> list[tuple[object, ...]]:
    rows: list[tuple[object, ...]] = []
    for name, score in group.predictors.items():
        bound = group.bounds.get(name)
        rows.append((label, group.n, name, score.mae_s, score.within_share, score.brier,
                     bound.coverage if bound else None, bound.median_overshoot_s if bound else None))
    return rows


def format_report(report: AccuracyReport) -> str:
    """The text tables `tao history accuracy` prints."""
    if report.overall is None:
        return "no completed calls to replay"
    headers = ("group", "n", "predictor", "mae_s", f"within_{report.tolerance_s:g}s", "brier",
               "bound_cover", "overshoot_s")
    groups = [("all", report.overall), *((f"harness {k}", g) for k, g in report.by_harness.items()),
              *((f"family {k}", g) for k, g in list(report.by_family.items())[:_TOP_FAMILIES])]
    table = format_table([row for label, group in groups for row in _group_rows(label, group)], headers)
    bins = [(f"{b.low:.1f}-{b.high:.1f}", b.n, b.mean_p, b.observed) for b in report.overall.reliability]
    calibration = format_table(bins, ("p_bin", "questions", "mean_p", "observed"))
    return (f"{table}\n\nreadiness calibration: P(return within {report.horizon_s:g} s | elapsed), "
            f"{report.overall.questions} questions (each call at 0, ½, 1, 2, 4 ... s while running)\n{calibration}")


def format_folds(reports: list[AccuracyReport]) -> str:
    """One line per fold and predictor: the overall scores of each fold's own replay."""
    rows = [(f"fold {index}", *row[1:]) for index, report in enumerate(reports) if report.overall is not None
            for row in _group_rows("", report.overall)]
    return format_table(rows, ("fold", "n", "predictor", "mae_s", "within_0.5s", "brier", "bound_cover",
                               "overshoot_s"))


def cmd_accuracy(args: argparse.Namespace) -> int:
    if args.folds < 1 or (args.folds > 1 and args.output is not None):
        print("--folds must be at least 1, and -o draws a single replay (leave out --folds)", file=sys.stderr)
        return 2
    store, config = open_history(args)
    with store:
        samples = list(selected(queries.call_samples(store), args.sessions, args.exclude_sessions))
    if args.folds > 1:
        reports = [replay_accuracy(fold, config.readiness) for fold in session_folds(samples, args.folds)]
        if args.json:
            print_json({"folds": [report.to_json() for report in reports]}, sys.stdout)
        else:
            print(format_folds(reports))
        return 0
    report = replay_accuracy(samples, config.readiness)
    if args.output is not None and report.overall is not None:
        from tao_harness.cli.history_plot import plot_accuracy

        plot_accuracy(report, args.output)
        print(f"wrote {args.output}", file=sys.stderr)
    if args.json:
        print_json(report.to_json(), sys.stdout)
    else:
        print(format_report(report))
    return 0
