"""Removing obvious secrets from command text and tool arguments before they are stored or spooled.

Built-in rules: `NAME=value` where NAME contains KEY/TOKEN/SECRET/PASSWORD/PASSWD/CREDENTIAL;
`--password x` / `--token=x` style flags; the password flags of tools that take one inline (`curl -u
user:pass`, `mysql -pX`, `sshpass -p X`, `docker login -p X`, `redis-cli -a X`, `aws configure set
aws_secret_access_key X`); `Authorization:`, `Cookie:` and token/key header values (`X-Auth-Token:`,
Azure's `api-key:`); `Bearer x`; well-known key formats (`sk-...`, `ghp_...`, `xoxb-...`, `AKIA...`,
`hf_...`, `glpat-...`) and inline PEM private keys; credentials in URLs (`scheme://user:secret@host`,
`scheme://token@host`) and secret-looking query parameters (`?token=`, `&api_key=` ...). In argument
objects, the value of a field named like a secret (`password`, `api_key`, `accessToken` ...) is masked
whole. Extra patterns (StoreConfig.redact_patterns) replace their whole match. Redaction is deliberately
greedy: a stored command loses a little information rather than leak a credential.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

MASK = "[REDACTED]"

_VALUE = r"""(?:"[^"]*"|'[^']*'|[^\s'"]+)"""
_SECRET_WORD = r"(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|PWD|CREDENTIALS?|AUTH)"

# The rest of a command up to the next shell separator: an inline flag belongs to the tool named before it.
_SAME_COMMAND = r"[^|;&\n]*?\s"

# (pattern, replacement); group 1, when present, is kept in front of the mask.
_BUILT_IN: tuple[tuple[str, str], ...] = (
    (r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", MASK),
    (rf"(\s(?:-u|--user)(?:\s+|=)?['\"]?[^\s:'\"]+:){_VALUE}", rf"\1{MASK}"),
    (rf"(\b(?:mysql\w*|mariadb[\w-]*){_SAME_COMMAND}-p)(?=[^\s]){_VALUE}", rf"\1{MASK}"),
    (rf"(\bsshpass\b{_SAME_COMMAND}-p\s*){_VALUE}", rf"\1{MASK}"),
    (rf"(\bdocker\s+login\b{_SAME_COMMAND}-p(?:\s+|=)){_VALUE}", rf"\1{MASK}"),
    (rf"(\bredis-cli\b{_SAME_COMMAND}(?:-a|--pass)(?:\s+|=)){_VALUE}", rf"\1{MASK}"),
    (
        rf"(?i)(\baws\s+configure\s+set\s+[\w.-]*(?:secret|key|token|password)[\w.-]*\s+){_VALUE}",
        rf"\1{MASK}",
    ),
    (rf"(?i)((?<![?&/\w.-])[A-Z0-9_]*{_SECRET_WORD}[A-Z0-9_]*\s*=\s*){_VALUE}", rf"\1{MASK}"),
    (r"(?i)(--?(?:password|passwd|token|api[-_]?key|secret|access[-_]?key)(?:=|\s+))" + _VALUE, rf"\1{MASK}"),
    (r"(?i)(\b(?:proxy-)?authorization\s*:\s*)(?:(?:bearer|basic|token|digest)\s+)?[^\s'\"]+", rf"\1{MASK}"),
    (r"(?i)(\bbearer\s+)[A-Za-z0-9._~+/=-]{8,}", rf"\1{MASK}"),
    (
        r"(?i)(\b(?:x-[\w-]*(?:token|key|auth|secret|password)[\w-]*|api-key|apikey|(?:set-)?cookie)\s*:\s*)"
        r"[^'\"\n]*[^\s'\"]",
        rf"\1{MASK}",
    ),
    (
        r"\b(?:sk-(?:ant-|proj-)?[A-Za-z0-9_-]{6,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
        r"|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|hf_[A-Za-z0-9]{20,}|glpat-[A-Za-z0-9_-]{20,})",
        MASK,
    ),
    (r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@'\"]+:)[^@\s/'\"]+@", rf"\1{MASK}@"),
    (r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^/\s:@'\"]+@", rf"\1{MASK}@"),  # a token as the user name
    (
        r"(?i)([?&](?:token|access_token|refresh_token|id_token|api_key|apikey|key|secret|password"
        r"|sig|signature"
        r"|x-amz-signature|x-amz-credential|auth)=)[^&\s#'\"]+",
        rf"\1{MASK}",
    ),
)
_BUILT_IN_RULES = tuple((re.compile(pattern), replacement) for pattern, replacement in _BUILT_IN)

# Every built-in rule needs one of these substrings (in lower case); text without any skips the rules
# (most commands). Plain substring tests: a case-insensitive regular expression costs several times more.
_TRIGGERS = (
    "key", "token", "secret", "passw", "passphrase", "pwd", "credential", "auth", "bearer", "sig", "sk-",
    "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat", "xox", "akia", "hf_", "glpat", "@", "-u", "--user", "mysql",
    "mariadb", "sshpass", "docker", "redis-cli", "aws", "cookie",
)


def _may_hold_secret(text: str) -> bool:
    lowered = text.lower()
    return any(trigger in lowered for trigger in _TRIGGERS)


# A field of an argument object whose last word names a secret: its value is masked whatever it looks like.
_SECRET_FIELD = re.compile(
    r"(?:^|[-_.])(?:password|passwd|pwd|passphrase|secret|token|api[-_]?key|apikey|access[-_]?key"
    r"|private[-_]?key|credentials?|auth|authorization|cookie)$"
)


_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _secret_field(name: str) -> bool:
    if not _may_hold_secret(name):  # most argument names ("command", "timeout"): no regex needed
        return False
    return bool(_SECRET_FIELD.search(_CAMEL_BOUNDARY.sub("_", name).lower()))


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
        rules = _BUILT_IN_RULES if _may_hold_secret(value) else ()
        for pattern, replacement in (*rules, *self._extra):
            value = pattern.sub(replacement, value)
        return value

    def value(self, value: Any) -> Any:
        """Redact every string inside a JSON-like value (dicts, lists, scalars)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {key: self._field(key, item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.value(item) for item in value]
        return value


    def _field(self, name: Any, item: Any) -> Any:
        masked = (
            self.enabled
            and isinstance(name, str)
            and isinstance(item, (str, int, float))
            and not isinstance(item, bool)
            and item != ""
            and _secret_field(name)
        )
        return MASK if masked else self.value(item)


def redactor_from(patterns: Iterable[str], enabled: bool = True) -> Redactor:
    return Redactor(tuple(patterns), enabled)
