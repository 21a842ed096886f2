"""Reply scripts for the emulated replica: a scenario is the list of turns a scripted "model" plays.

A turn is a bash call, a Monitor call or the final answer, with the output tokens it costs (so the
context grows like a real session). Built-in scenarios ship as YAML package data; `--scenario` also
takes a path to a YAML or JSON file of the same shape:

    name: swe-short
    turns:
      - bash: timeout 30 pytest -q      # command text, as the harness will run it
        timeout_s: 60                    # optional: sent as the tool's timeout (ms for Bash/bash)
        run_in_background: false         # optional (Claude Code's Bash)
        output_tokens: 200               # optional: tokens this reply costs, padded with reasoning text
      - monitor: tail -f build.log       # Claude Code's Monitor; bash where Monitor is not offered
        timeout_s: 30
      - answer: All tests pass.
"""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

DEFAULT_SCENARIO = "swe-short"


class ScenarioError(ValueError):
    """A scenario that cannot be found or parsed; the message says which and why."""


class ScenarioTurn(BaseModel):
    """One scripted reply."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    bash: str | None = None
    """Command of a bash tool call."""

    monitor: str | None = None
    """Command of a Monitor tool call (Claude Code); offered tools without Monitor get a bash call."""

    answer: str | None = None
    """Final answer text; the session ends here."""

    description: str | None = None
    """Short description sent when the tool's schema has a `description` argument."""

    timeout_s: float | None = Field(None, gt=0)
    """Timeout sent with the call, converted to the tool's unit (milliseconds for Bash/bash/Monitor)."""

    run_in_background: bool = False
    """Ask Claude Code's Bash to run the command in the background."""

    persistent: bool = False
    """Monitor's `persistent` flag."""

    output_tokens: int | None = Field(None, ge=1)
    """Tokens this reply should cost; the reply is padded with reasoning text up to this size."""

    @model_validator(mode="after")
    def _exactly_one_action(self) -> ScenarioTurn:
        chosen = [k for k in ("bash", "monitor", "answer") if getattr(self, k) is not None]
        if len(chosen) != 1:
            raise ValueError(f"a turn needs exactly one of bash, monitor, answer (got {chosen or 'none'})")
        return self

    @property
    def is_final(self) -> bool:
        return self.answer is not None


class Scenario(BaseModel):
    """A scripted agent session."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    name: str
    """Name shown in logs and /v1/models."""

    description: str = ""
    """One line on what the scenario exercises."""

    turns: tuple[ScenarioTurn, ...] = Field(min_length=1)
    """The replies in order; after the last tool turn without an answer, a default answer follows."""

    side_answer: str = "Emulated session"
    """Reply to side requests that offer no tools (titles, topic and quota probes)."""

    final_answer: str = "Done."
    """Answer used when the turns run out without an explicit answer turn."""

    def turn(self, tool_results: int) -> ScenarioTurn:
        """The turn to play after `tool_results` tool results; progress is read off the conversation."""
        tool_turns = 0
        for turn in self.turns:
            if turn.is_final or tool_turns == tool_results:
                return turn
            tool_turns += 1
        return ScenarioTurn(answer=self.final_answer)


def _folder() -> Traversable:
    # scenarios/ is package data of tao_harness.replica, not a package of its own.
    return resources.files("tao_harness.replica").joinpath("scenarios")


def builtin_names() -> list[str]:
    """Names of the scenarios shipped with the package."""
    return sorted(p.name.removesuffix(".yaml") for p in _folder().iterdir() if p.name.endswith(".yaml"))


def parse_scenario(text: str, source: str) -> Scenario:
    """A scenario from YAML/JSON text; `source` names it in errors."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ScenarioError(f"scenario {source} is not valid YAML/JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ScenarioError(f"scenario {source} must be a mapping with a 'turns' list")
    data.setdefault("name", Path(source).stem)
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(top level)"
        raise ScenarioError(f"scenario {source}: {where}: {first['msg']}") from None


def load_scenario(name_or_path: str) -> Scenario:
    """A built-in scenario by name, or a scenario file by path."""
    if name_or_path in builtin_names():
        text = _folder().joinpath(f"{name_or_path}.yaml").read_text()
        return parse_scenario(text, name_or_path)
    path = Path(name_or_path)
    if not path.is_file():
        known = ", ".join(builtin_names())
        raise ScenarioError(
            f"no scenario file or built-in scenario named {name_or_path!r}; built-ins: {known}"
        )
    try:
        return parse_scenario(path.read_text(), str(path))
    except OSError as exc:
        raise ScenarioError(f"cannot read scenario file {path}: {exc.strerror}") from None
