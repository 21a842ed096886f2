"""Planners: pure functions Snapshot -> Plan (exact lexicographic DP, best-fit-decreasing). No I/O."""
