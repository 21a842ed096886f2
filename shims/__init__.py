"""Per-harness adapters and `tao-run`'s telemetry path; installed as tao_harness.shims.

- `claude_code/`, `opencode/`, `mini_swe_agent/`: one shim per harness, each with `prepare(argv, context)`
  returning the command and environment that install it (`launch.py` picks one by executable name).
- `relay.py`: the loopback endpoint shims post to; `forwarder.py` / `delivery.py`: background delivery
  to the coordinator; `spool.py`: the JSONL spool for what could not be delivered.
- `endpoints.py`: which coordinator and proxy a run uses; `runner.py`: one `tao-run` from start to end.
"""
