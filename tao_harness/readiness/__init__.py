"""Tool-return readiness: family keys, hint parsing, the empirical-Bernstein duration estimator.

- `family`: `family_key(tool_name, command)` — the history's grouping key (`Read`, `bash:pytest`).
- `hints`: `parse_hints(...) -> Hints` — sleep lower bounds, timeout upper bounds, background launches.
- `estimator`: `DurationHistory` (in-memory per-family stats), `bernstein_bound`, `predict -> Prediction`.
- `distribution`: `ReturnDistribution` — weighted, censoring-aware return times; P(return within H | elapsed).
- `neighbors`: `NeighborHistory` — the return-time distribution from the most similar earlier calls.
- `session_files`: `SessionFiles` — the scripts a session wrote, so that a run of one is described by its words.
- `call`: `Forecaster` — hints, neighbours and bounds combined: point estimate, bound, distribution.
- `state`: the binary readiness r(t) over a frozen `ToolExecution`, with the one-time overdue probe.
- `accuracy`, `accuracy_report`: `replay_accuracy(calls) -> AccuracyReport` (the forecast beside the
  baselines: MAE, share within 0.5 s, bound coverage, Brier score and reliability table).
- `shell`, `launchers`, `units`: the shell-line reader the first two are built on.
"""
