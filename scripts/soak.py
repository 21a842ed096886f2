"""The full soak of the fault campaign: 160 sessions in waves over 10 minutes of emulated time.

Prints the soak's rows (RSS growth of the coordinator and the proxy, sessions and reservations left,
failed requests). The CI-sized version is `tests/fleet/test_fault_campaign.py`; the whole campaign at
full size is `tao bench live --faults`.

    .venv/bin/python scripts/soak.py [--sessions 160] [--emulated-s 600] [--time-scale 20]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
import time

from tao_harness.fleet.faults import run_campaign, table
from tao_harness.fleet.faults.common import FaultSettings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=160, help="concurrent sessions per wave (default 160)")
    parser.add_argument("--emulated-s", type=float, default=600.0, help="emulated seconds to run (default 600)")
    parser.add_argument("--time-scale", type=float, default=20.0, help="emulated/real time ratio (default 20)")
    args = parser.parse_args()
    settings = dataclasses.replace(FaultSettings.full(), soak_sessions=args.sessions,
                                   soak_emulated_s=args.emulated_s, time_scale=args.time_scale)
    started = time.monotonic()
    rows = asyncio.run(run_campaign(settings, only=("soak",)))
    print(table(rows))
    for row in rows:
        if row.detail:
            print(f"- {row.figure}: {row.detail}")
    print(f"wall {time.monotonic() - started:.0f} s")
    return 0 if all(r.met for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
