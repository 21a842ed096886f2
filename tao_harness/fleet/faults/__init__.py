"""The fault campaign of `tao bench live --faults` (campaign.py): scripted faults on one small `tao` cluster
(cluster.py), one table of goals met. Each fault script returns its rows: malformed and adversarial input
(inputs.py with fuzz.py's cases, edges.py), disconnects, the soak and processes killed mid-run (runs.py,
proxy.py), the scale soak (scale.py); common.py holds their settings, rows and helpers."""

from tao_harness.fleet.faults.campaign import fault_names, run_and_report, run_campaign, table, write_report

__all__ = ["fault_names", "run_and_report", "run_campaign", "table", "write_report"]
