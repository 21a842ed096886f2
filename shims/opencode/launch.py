"""Launching OpenCode with the shim: plugin + proxy provider through `OPENCODE_CONFIG_CONTENT`.

The user's own `OPENCODE_CONFIG_CONTENT` (if any) is merged, never replaced: our plugin is appended to
its `plugin` list, and a provider `tao` (`@ai-sdk/openai-compatible`, `options.baseURL` at the proxy,
`options.headers` with `X-TAO-Session`) is added. Providers the user already points at an
OpenAI-compatible server are re-pointed at the proxy too, keeping their model lists, so their traffic is
scheduled as well. Every model the command names as `tao/<model>` (`-m`/`--model`) is declared on the
`tao` provider. Config files on disk are never touched.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from tao_harness.shims.launch import Launch, LaunchContext, LaunchError, base_env

PROVIDER = "tao"
OPENAI_COMPATIBLE = "@ai-sdk/openai-compatible"
PLUGIN_FILE = "plugin.js"


def plugin_source() -> str:
    return resources.files("tao_harness.shims.opencode").joinpath(PLUGIN_FILE).read_text(encoding="utf-8")


def _models_named(argv: tuple[str, ...]) -> list[str]:
    named: list[str] = []
    for index, arg in enumerate(argv):
        value = None
        if arg in ("-m", "--model") and index + 1 < len(argv):
            value = argv[index + 1]
        elif arg.startswith("--model="):
            value = arg.split("=", 1)[1]
        if value and value.startswith(PROVIDER + "/"):
            named.append(value.split("/", 1)[1])
    return named


def _user_config(text: str | None) -> dict[str, Any]:
    if not text or not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise LaunchError(f"OPENCODE_CONFIG_CONTENT is not valid JSON ({exc}); fix or unset it") from None
    if not isinstance(data, dict):
        raise LaunchError("OPENCODE_CONFIG_CONTENT must be a JSON object")
    return data


def _with_proxy(provider: dict[str, Any], base_url: str, session: str) -> dict[str, Any]:
    options = dict(provider.get("options") or {})
    options["baseURL"] = base_url
    options["headers"] = {**(options.get("headers") or {}), "X-TAO-Session": session}
    return {**provider, "options": options}


def merged_config(user: dict[str, Any], plugin_url: str, base_url: str, session: str,
                  models: list[str]) -> dict[str, Any]:
    providers: dict[str, Any] = {}
    for name, provider in (user.get("provider") or {}).items():
        rerouted = isinstance(provider, dict) and provider.get("npm") == OPENAI_COMPATIBLE
        providers[name] = _with_proxy(provider, base_url, session) if rerouted else provider
    ours = providers.get(PROVIDER) or {"npm": OPENAI_COMPATIBLE, "name": "TAO proxy"}
    ours = _with_proxy(ours, base_url, session)
    ours["models"] = {**{m: {} for m in models}, **(ours.get("models") or {})}
    providers[PROVIDER] = ours
    plugins = [p for p in (user.get("plugin") or []) if p != plugin_url]
    return {**user, "provider": providers, "plugin": [*plugins, plugin_url]}


def prepare(argv: tuple[str, ...], context: LaunchContext) -> Launch:
    plugin_path = context.workdir / "tao-opencode-plugin.js"
    # A copy in the run's private directory: works the same from a wheel, a zip or a source tree.
    plugin_path.write_text(plugin_source(), encoding="utf-8")
    user = _user_config(context.environ.get("OPENCODE_CONFIG_CONTENT"))
    config = merged_config(user, plugin_path.as_uri(), context.session_base_url + "/v1", context.session,
                           _models_named(argv))
    env = base_env(context)
    env["OPENCODE_CONFIG_CONTENT"] = json.dumps(config)
    return Launch(argv, env, "opencode")
