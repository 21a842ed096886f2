"""What the planner's benchmarks (scripts/bench_planner.py, scripts/bench_versus.py) and tests plan and
check against, kept out of the runtime package: random snapshot shapes (shapes.py) and independent exact
solvers (reference.py). Scripts find it beside them; pytest has `scripts` on its path (pyproject.toml)."""
