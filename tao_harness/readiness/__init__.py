"""Tool-return readiness: family keys, hint parsing, the empirical-Bernstein duration estimator.

- `family`: `family_key(tool_name, command)` — the history's grouping key (`Read`, `bash:pytest`).
- `hints`: `parse_hints(...) -> Hints` — sleep lower bounds, timeout upper bounds, background launches.
- `estimator`: `DurationHistory` (in-memory per-family stats), `bernstein_bound`, `predict -> Prediction`.
- `state`: the binary readiness r(t) over a frozen `ToolExecution`, with the one-time overdue probe.
- `accuracy`: `replay_accuracy(calls) -> AccuracyReport` (MAE, share within 0.5 s).
- `shell`, `launchers`, `units`: the shell-line reader the first two are built on.
"""
