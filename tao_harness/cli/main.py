"""`tao`: one entry point, one module per subcommand.

Subcommand modules are imported only when chosen, so `tao --help` and shim-side calls start fast.
A module provides `add_arguments(parser)` and `run(args) -> int`; it raises `UsageError` for bad
input, which becomes a one-line message and exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from typing import Sequence

from tao_harness import __version__
from tao_harness.cli.common import UsageError

# name -> (module, one-line help). A new subcommand adds one line here.
COMMANDS: dict[str, tuple[str, str]] = {
    "history": ("tao_harness.cli.history", "query and maintain the tool-duration history"),
    "demo": ("tao_harness.cli.demo", "run the live system on emulated replicas with scripted agents"),
    "coordinator": ("tao_harness.cli.coordinator", "run the coordinator: session pool, planner, replica registry"),
    "proxy": ("tao_harness.cli.proxy", "serve the agents' OpenAI/Anthropic endpoint in front of the replicas"),
    "replica": ("tao_harness.cli.replica", "run the emulated vLLM replica server (OpenAI + Anthropic APIs)"),
    "spool": ("tao_harness.cli.spool", "show or deliver tool events that tao-run could not deliver"),
    "trace": ("tao_harness.cli.trace", "generate synthetic agent traces, summarize them, export recorded sessions"),
    "bench": ("tao_harness.cli.bench", "compare scheduling policies: in the simulator (compare) or over real HTTP "
              "on emulated replicas (live)"),
    "sim": ("tao_harness.cli.sim", "replay a trace against one policy on simulated replicas"),
    "plan": ("tao_harness.cli.plan", "plan one snapshot (JSON) with a scheduling policy and show the decision"),
}


def _chosen_command(argv: Sequence[str]) -> str | None:
    for arg in argv:
        if not arg.startswith("-"):
            return arg if arg in COMMANDS else None
    return None


def build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tao",
        description="Tool-aware scheduling and telemetry for LLM agents on vLLM replicas.",
    )
    parser.add_argument("--version", action="version", version=f"tao_harness {__version__}")
    # Not `dest="command"`: a subcommand's own --command option (history predict) would overwrite it.
    commands = parser.add_subparsers(dest="tao_command", metavar="COMMAND")
    chosen = _chosen_command(argv)
    for name, (module_name, help_text) in COMMANDS.items():
        sub = commands.add_parser(name, help=help_text, description=help_text)
        if name == chosen:
            module = importlib.import_module(module_name)
            module.add_arguments(sub)
            sub.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    run = getattr(args, "_run", None)
    if run is None:
        parser.print_help()
        return 2
    try:
        code = int(run(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's final flush
        return code
    except UsageError as exc:
        print(f"tao {args.tao_command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _reader_went_away()


def _reader_went_away() -> int:
    """`tao ... | head`: the reader closed the pipe. Stop quietly, as `cat` does, with SIGPIPE's exit code.

    Standard output is pointed at /dev/null so the interpreter's final flush does not raise again.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout replaced by an object without a file descriptor
        pass
    finally:
        os.close(devnull)
    return 128 + signal.SIGPIPE


if __name__ == "__main__":
    sys.exit(main())
