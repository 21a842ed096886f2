"""Removing obvious secrets from command text and tool arguments before they are stored.

Built-in rules: `NAME=value` where NAME contains KEY/TOKEN/SECRET/PASSWORD/PASSWD/CREDENTIAL;
`--password x` / `--token=x` style flags; `Authorization:` header values; `Bearer x`; well-known key
formats (`sk-...`, `ghp_...`, `xoxb-...`, `AKIA...`, `hf_...`, `glpat-...`); passwords in URLs
(`scheme://user:secret@host`) and secret-looking query parameters (`?token=`, `&api_key=` ...).
Extra patterns (StoreConfig.redact_patterns) replace their whole match. Redaction is deliberately
greedy: a stored command loses a little information rather than leak a credential.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

MASK = "[REDACTED]"

_VALUE = r"""(?:"[^"]*"|'[^']*'|[^\s'"]+)"""
_SECRET_WORD = r"(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|PWD|CREDENTIALS?|AUTH)"

# (pattern, replacement); group 1, when present, is kept in front of the mask.
_BUILT_IN: tuple[tuple[str, str], ...] = (
    (rf"(?i)((?<![?&/\w.-])[A-Z0-9_]*{_SECRET_WORD}[A-Z0-9_]*\s*=\s*){_VALUE}", rf"\1{MASK}"),
    (r"(?i)(--?(?:password|passwd|token|api[-_]?key|secret|access[-_]?key)(?:=|\s+))" + _VALUE, rf"\1{MASK}"),
    (r"(?i)(\b(?:proxy-)?authorization\s*:\s*)(?:(?:bearer|basic|token|digest)\s+)?[^\s'\"]+", rf"\1{MASK}"),
    (r"(?i)(\bbearer\s+)[A-Za-z0-9._~+/=-]{8,}", rf"\1{MASK}"),
    (r"(?i)(\bx-api-key\s*:\s*)[^\s'\"]+", rf"\1{MASK}"),
    (
        r"\b(?:sk-(?:ant-|proj-)?[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
        r"|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|hf_[A-Za-z0-9]{20,}|glpat-[A-Za-z0-9_-]{20,})",
        MASK,
    ),
    (r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@'\"]+:)[^@\s/'\"]+@", rf"\1{MASK}@"),
    (
        r"(?i)([?&](?:token|access_token|refresh_token|id_token|api_key|apikey|key|secret|password"
        r"|sig|signature"
        r"|x-amz-signature|x-amz-credential|auth)=)[^&\s#'\"]+",
        rf"\1{MASK}",
    ),
)
_BUILT_IN_RULES = tuple((re.compile(pattern), replacement) for pattern, replacement in _BUILT_IN)

# Every built-in rule needs one of these substrings; text without any skips the rules (most commands).
_TRIGGERS = re.compile(
    r"(?i)key|token|secret|passw|pwd|credential|auth|bearer|sig|sk-|gh[pousr]_|github_pat|xox|akia|hf_|glpat"
    r"|://[^/\s'\"]*@"
)


@dataclass(frozen=True)
class Redactor:
    """Applies the built-in rules and any extra patterns; `enabled=False` passes text through."""

    extra_patterns: tuple[str, ...] = ()
    enabled: bool = True
    _extra: tuple[tuple[re.Pattern[str], str], ...] = field(init=False, repr=False, compare=False, default=())

    def __post_init__(self) -> None:
        extra: list[tuple[re.Pattern[str], str]] = []
        for pattern in self.extra_patterns:
            try:
                extra.append((re.compile(pattern), MASK))
            except re.error as exc:
                raise ValueError(
                    f"redact pattern {pattern!r} is not a valid regular expression: {exc}"
                ) from None
        object.__setattr__(self, "_extra", tuple(extra))  # frozen: set once, here

    def text(self, value: str) -> str:
        if not self.enabled:
            return value
        rules = _BUILT_IN_RULES if _TRIGGERS.search(value) else ()
        for pattern, replacement in (*rules, *self._extra):
            value = pattern.sub(replacement, value)
        return value

    def value(self, value: Any) -> Any:
        """Redact every string inside a JSON-like value (dicts, lists, scalars)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {key: self.value(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.value(item) for item in value]
        return value


def redactor_from(patterns: Iterable[str], enabled: bool = True) -> Redactor:
    return Redactor(tuple(patterns), enabled)
