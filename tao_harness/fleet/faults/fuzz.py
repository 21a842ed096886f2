"""Malformed input for every endpoint of the coordinator, the proxy and the replica, from a seeded generator.

Each endpoint has a valid body template and the kind of each field. A case breaks the body in one way
that no lenient parser may accept: not JSON, JSON that is not an object, a required field missing, a
field of a type that cannot be coerced (pydantic's lax mode turns "4" into 4, so that is never used),
a body just over the server's size limit, or a GET-only route called with POST. The coordinator's fields
also get values that are well-formed JSON but that its history store cannot hold (a 201-character or
NUL-bearing id, 2**63, 10**400): they must be refused too, not fail in the store. Every answer must be
4xx with a JSON body; a 5xx, a 2xx, a non-JSON body or a dropped connection is a failure.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp

Kind = Literal["str", "int", "num", "bool", "list", "dict", "messages"]


@dataclass(frozen=True, slots=True)
class Endpoint:
    server: str  # "coordinator", "proxy" or "replica"
    path: str
    # A valid body (None: a GET route, fuzzed by calling it with POST).
    template: dict[str, Any] | None
    # Fields a case may break, with their kind; `required` ones may also be dropped.
    fields: tuple[tuple[str, Kind], ...] = ()
    required: tuple[str, ...] = ()
    # The server's body limit in bytes (a case sends a little more).
    limit: int = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class FuzzCase:
    endpoint: Endpoint
    label: str
    body: bytes
    method: str = "POST"


@dataclass(frozen=True, slots=True)
class FuzzOutcome:
    case: FuzzCase
    status: int | None  # None: no HTTP answer (connection dropped)
    json_body: bool

    @property
    def ok(self) -> bool:
        return self.status is not None and 400 <= self.status < 500 and self.json_body

    def describe(self) -> str:
        return (f"{self.case.endpoint.server} {self.case.method} {self.case.endpoint.path} [{self.case.label}]: "
                f"HTTP {self.status}{'' if self.json_body else ', not JSON'}")


_CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
_CHAT_FIELDS: tuple[tuple[str, Kind], ...] = (("model", "str"), ("messages", "messages"), ("max_tokens", "int"),
                                              ("stream", "bool"))
_ANTHROPIC = {"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}
_COMPLETION = {"model": "m", "prompt": "hi", "max_tokens": 4}
_COMPLETION_FIELDS: tuple[tuple[str, Kind], ...] = (("model", "str"), ("max_tokens", "int"), ("stream", "bool"))
_TOOL_START = {"type": "tool_start", "session": "fuzz-s", "call_id": "fuzz-c", "tool_name": "bash",
               "command": "ls", "at": 1.0}
_MB64 = 64 * 1024 * 1024


def endpoints() -> tuple[Endpoint, ...]:
    """Every route the three servers serve (the proxy forwards generation routes to a replica)."""
    generation = (
        ("/v1/chat/completions", _CHAT, _CHAT_FIELDS, ("messages",)),
        ("/v1/completions", _COMPLETION, _COMPLETION_FIELDS, ("prompt",)),
        ("/v1/messages", _ANTHROPIC, _CHAT_FIELDS, ("messages", "max_tokens")),
    )
    found = [
        Endpoint("coordinator", "/v1/admit",
                 {"session": "fuzz-s", "request_id": "fuzz-r", "prompt_tokens_estimate": 10, "wait_s": 0.1},
                 (("session", "str"), ("request_id", "str"), ("prompt_tokens_estimate", "int"),
                  ("wait_s", "num"), ("exclude", "list"), ("prefix_group", "str"), ("shared_tokens_estimate", "int")),
                 ("session", "request_id")),
        Endpoint("coordinator", "/v1/requests/done", {"session": "fuzz-s", "request_id": "fuzz-r", "status": "ok"},
                 (("session", "str"), ("request_id", "str"), ("status", "str"), ("prompt_tokens", "int"),
                  ("ttft_s", "num")), ("session", "request_id", "status")),
        Endpoint("coordinator", "/v1/events", _TOOL_START,
                 (("type", "str"), ("session", "str"), ("call_id", "str"), ("tool_name", "str"), ("at", "num"),
                  ("args", "dict")), ("type", "session", "call_id", "at")),
        Endpoint("coordinator", "/v1/sessions", {"session": "fuzz-s", "harness": "fuzz", "labels": {"a": "b"}},
                 (("session", "str"), ("harness", "str"), ("labels", "dict"), ("started_at", "num")), ("session",)),
        Endpoint("coordinator", "/v1/state", None),
        Endpoint("coordinator", "/healthz", None),
        Endpoint("coordinator", "/metrics", None),
        Endpoint("replica", "/v1/messages/count_tokens", _ANTHROPIC, _CHAT_FIELDS[:2], ("messages",), _MB64),
        Endpoint("replica", "/health", None),
        Endpoint("replica", "/v1/models", None),
        Endpoint("replica", "/metrics", None),
    ]
    for server in ("proxy", "replica"):
        found += [Endpoint(server, path, body, fields, required, _MB64) for path, body, fields, required in generation]
    return tuple(found)


def _wrong_value(kind: Kind, rng: random.Random) -> Any:
    """A non-null value no parser may accept for a field of `kind` (nor coerce into it)."""
    word = "".join(rng.choice("xyzq#é\u2603") for _ in range(rng.randint(1, 12)))
    choices: dict[Kind, list[Any]] = {
        "str": [rng.randint(-10**6, 10**6), [word], {"k": word}, True],
        "int": [word, [1, 2], {"k": 1}, rng.random() + 0.5],
        "num": [word, [1.5], {"k": 1.5}],
        "bool": [word + "!", [True], {"k": True}, rng.randint(2, 99)],
        "list": [word, rng.randint(1, 99), {"k": [word]}, [rng.randint(1, 9), {"k": 1}]],
        "dict": [word, rng.randint(1, 99), [word, 1]],
        "messages": [word, rng.randint(1, 99), {"role": "user"}, [rng.randint(1, 9)], [{"role": 7, "content": 1}],
                     [{"content": word}], [{"role": "user", "content": rng.randint(1, 9)}]],
    }
    return rng.choice(choices[kind])


# Values of the right JSON type that no column of the history store can take (tao_harness.store.limits).
_UNSTORABLE: dict[Kind, tuple[Any, ...]] = {"str": ("x" * 201, "a\x00b"), "int": (2**63, 10**400), "num": (10**400,)}


def cases(endpoint: Endpoint, rng: random.Random, per_field: int = 2, huge: bool = True) -> list[FuzzCase]:
    """The malformed requests for one endpoint; deterministic in `rng`'s seed."""
    if endpoint.template is None:
        return [FuzzCase(endpoint, "POST to a GET route", json.dumps({"x": 1}).encode())]
    text = json.dumps(endpoint.template)
    found = [
        FuzzCase(endpoint, "not JSON", bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))),
        FuzzCase(endpoint, "truncated JSON", text[: rng.randint(1, len(text) - 1)].encode()),
        FuzzCase(endpoint, "empty body", b""),
        *(FuzzCase(endpoint, f"JSON {type(value).__name__}", json.dumps(value).encode())
          for value in ([endpoint.template], "text", 42, None)),
    ]
    for name in endpoint.required:
        body = {k: v for k, v in endpoint.template.items() if k != name}
        found.append(FuzzCase(endpoint, f"missing {name}", json.dumps(body).encode()))
    for name, kind in endpoint.fields:
        for _ in range(per_field):
            value = _wrong_value(kind, rng)
            body = endpoint.template | {name: value}
            found.append(FuzzCase(endpoint, f"{name}={json.dumps(value)[:40]}", json.dumps(body).encode()))
        for value in _UNSTORABLE.get(kind, ()) if endpoint.server == "coordinator" else ():
            body = endpoint.template | {name: value}
            found.append(FuzzCase(endpoint, f"{name}={json.dumps(value)[:40]}", json.dumps(body).encode()))
    if huge:
        padding = b" " * (endpoint.limit + 1024 - len(text))
        found.append(FuzzCase(endpoint, "over the size limit", text.encode() + padding))
    return found


async def send(http: aiohttp.ClientSession, base_url: str, case: FuzzCase, session: str) -> FuzzOutcome:
    headers = {"Content-Type": "application/json", "x-session-id": session}
    try:
        async with http.request(case.method, base_url + case.endpoint.path, data=case.body, headers=headers,
                                timeout=aiohttp.ClientTimeout(total=60)) as response:
            raw = await response.read()
            try:
                json.loads(raw)
                is_json = True
            except ValueError:
                is_json = False
            return FuzzOutcome(case, response.status, is_json)
    except (aiohttp.ClientError, TimeoutError):
        return FuzzOutcome(case, None, False)
