"""Helpers shared by the command modules: the usage error, JSON output, argparse types (tables:
tao_harness/tables.py)."""

from __future__ import annotations

import argparse
import math
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from tao_harness.config import ConfigError, TaoConfig, load_config

if TYPE_CHECKING:
    from tqdm import tqdm

    from tao_harness.store.engine import Store


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit code 2, never a traceback."""


def print_json(value: Any, out: TextIO | None = None) -> None:
    out = out or sys.stdout  # resolved per call, so redirected stdout (and pytest's capsys) is honoured
    json.dump(value, out, indent=2, default=str)
    out.write("\n")


def progress_bar(total: int, desc: str, unit: str, *, off: bool) -> tqdm:
    """A progress bar on stderr; none when `off` (--json) or when stderr is not a terminal."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, disable=True if off else None)


def port_number(text: str) -> int:
    """argparse type of a `--port`: 0 (a free port) to 65535. A larger number was bound modulo 65536."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(
            f"expected a port number from 0 to 65535 (0 picks a free one), got {text!r}")
    return port


def gib_size(text: str) -> float:
    """argparse type of a memory size in GiB (`--kv-offloading-size`): a positive, finite number."""
    try:
        size = float(text)
    except ValueError:
        size = -1.0
    if not 0 < size < math.inf:
        raise argparse.ArgumentTypeError(f"expected a positive number of GiB, got {text!r}")
    return size


def new_file(text: str) -> Path:
    """argparse type of an output file (`-o FILE`): its folder must exist. A typo in a folder name is an
    error, not a new tree of folders."""
    if not text or Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"expected a file to write, got {text!r}")
    return _in_a_folder(text)


def new_dir(text: str) -> Path:
    """argparse type of an output directory (`-o DIR`), created if need be: the folder it is in must
    exist, as for `new_file`."""
    if not text or Path(text).is_file():
        raise argparse.ArgumentTypeError(f"expected a directory to write into, got {text!r}")
    return _in_a_folder(text)


def _in_a_folder(text: str) -> Path:
    path = Path(text)
    if not path.parent.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: no directory {path.parent}")
    return path


def parse_replica_flag(text: str) -> dict[str, Any]:
    """`ID=URL[@RANK]` (e.g. `r1=http://127.0.0.1:8000@1`) -> ReplicaSpec fields."""
    rid, sep, rest = text.partition("=")
    if not sep or not rid or not rest:
        raise UsageError(f"--replica {text!r}: expected ID=URL[@RANK], e.g. r0=http://127.0.0.1:8000")
    url, at, rank = rest.rpartition("@") if "@" in rest.split("//", 1)[-1] else (rest, "", "")
    if at and not rank.isdigit():
        raise UsageError(f"--replica {text!r}: the data-parallel rank after '@' must be a whole number")
    check_http_url(f"--replica {text!r}", url)
    return {"id": rid, "base_url": url, "dp_rank": int(rank) if at else None}


def check_http_url(flag: str, url: str | None) -> None:
    """A URL option must name an HTTP server (`http://host:port`): anything else is a UsageError."""
    if url is not None and (not url.startswith(("http://", "https://")) or not url.split("//", 1)[1].strip("/")):
        raise UsageError(f"{flag}: the URL must start with http:// or https:// and name a host, got {url!r}")


def cluster_config_from_args(args: argparse.Namespace, overrides: dict[str, object]) -> TaoConfig:
    """Config file + env + `overrides`, with `--replica` flags appended to the file's replica list."""
    try:
        config = load_config(args.config, overrides)
        extra = [parse_replica_flag(text) for text in args.replica]
        if extra:
            replicas = [r.model_dump() for r in config.cluster.replicas] + extra
            config = load_config(args.config, overrides | {"cluster.replicas": replicas})
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    return config


def add_store_options(parser: argparse.ArgumentParser) -> None:
    """`--db` and `--config`, for commands that read or write the history store."""
    parser.add_argument(
        "--db",
        metavar="URL",
        help="database URL or SQLite file path (default: TAO_DB_URL, "
        "else history.db in the user data directory)",
    )
    parser.add_argument("--config", type=Path, metavar="FILE", help="tao config file (TOML or YAML)")


def history_config(args: argparse.Namespace) -> TaoConfig:
    """The config file + env with `--db` applied; a bad config becomes a UsageError."""
    try:
        return load_config(args.config, overrides={"store.url": args.db})
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def open_history(args: argparse.Namespace, *, create: bool = False) -> tuple[Store, TaoConfig]:
    """The store named by `--db` / TAO_DB_URL / the config file; bad input becomes a UsageError."""
    from tao_harness.store.engine import StoreError, open_store

    config = history_config(args)
    try:
        return open_store(config.store.url, create=create), config
    except StoreError as exc:
        raise UsageError(str(exc)) from None
