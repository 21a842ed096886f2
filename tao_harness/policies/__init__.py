"""Scheduling policies (TAO, its ablations and the baselines), one short module each, selected by name."""
