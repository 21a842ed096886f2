"""Recording the snapshots a scheduler plans, one JSON file each, for offline replay.

`tao sim --dump-snapshots DIR` and `tao coordinator --dump-snapshots DIR` (config `planner.dump_snapshots`)
write every snapshot they hand to the policy, in the public format of docs/snapshot.md, as
DIR/<run>-<n>.json; `tao plan FILE` replays one and `scripts/bench_planner.py --replay DIR` all of them.
Telemetry fails open: a write that fails is logged once and recording stops; planning goes on.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

from tao_harness.types import Snapshot

log = logging.getLogger(__name__)


class SnapshotDump:
    """Writes snapshots into one folder, numbered in planning order."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.run = f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"  # several runs may share a folder
        self.count = 0
        self.failed = False

    def write(self, snapshot: Snapshot) -> None:
        if self.failed:
            return
        self.count += 1
        path = self.folder / f"{self.run}-{self.count:06d}.json"
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(snapshot.to_json(), separators=(",", ":")))
        except OSError as exc:
            self.failed = True
            log.warning("snapshot recording stopped: cannot write %s: %s", path, exc)


def snapshot_dump(folder: str | None) -> SnapshotDump | None:
    return None if folder is None else SnapshotDump(folder)
