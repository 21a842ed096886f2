"""Tool-return readiness: family keys, hint parsing, the empirical-Bernstein duration estimator."""
