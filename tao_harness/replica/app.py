"""The replica's aiohttp application: one engine and driver task per data-parallel rank, and the routes.

Endpoints: OpenAI `/v1/chat/completions`, `/v1/completions`, `/v1/models`; Anthropic `/v1/messages`
(`?beta=true` is accepted, as Claude Code sends it) and `/v1/messages/count_tokens`; vLLM's `/tokenize`,
`/detokenize`, `/version`; `/health`; `/metrics`. Engines and driver tasks are created in `cleanup_ctx` and cancelled there on shutdown.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator

from aiohttp import web

from tao_harness.auth import agent_token_middleware
from tao_harness.config import ReplicaConfig
from tao_harness.engine.api import EngineConfig
from tao_harness.engine.core import EngineCore
from tao_harness.replica import routes
from tao_harness.replica.errors import error_middleware
from tao_harness.replica.generation import RankDriver
from tao_harness.replica.keys import DRIVERS, RENDER_CACHE, ROUND_ROBIN, SCENARIO, SETTINGS, VOCABULARY
from tao_harness.replica.metrics import CONTENT_TYPE, render_metrics
from tao_harness.replica.scenario import Scenario
from tao_harness.replica.template import RenderCache
from tao_harness.replica.tokenizer import Vocabulary


def build_drivers(settings: ReplicaConfig) -> list[RankDriver]:
    """One engine per rank, each with its own KV cache."""
    engine_config = EngineConfig(profile=settings.profile, num_gpu_blocks=settings.num_gpu_blocks,
                                 kv_offloading_size_gib=settings.kv_offloading_size)
    return [
        RankDriver(rank, EngineCore(engine_config), settings.time_scale, settings.max_step_wall_s)
        for rank in range(settings.data_parallel_size)
    ]


async def _run_drivers(app: web.Application) -> AsyncIterator[None]:
    tasks = [asyncio.create_task(d.run(), name=f"replica-rank-{d.rank}") for d in app[DRIVERS]]
    yield
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def health(request: web.Request) -> web.Response:
    return web.Response(status=200)


def _permission(model: str) -> dict[str, object]:
    """vLLM's (OpenAI's legacy) model permission card: everything allowed."""
    return {
        "id": f"modelperm-{model}",
        "object": "model_permission",
        "created": int(time.time()),
        "allow_create_engine": False,
        "allow_sampling": True,
        "allow_logprobs": True,
        "allow_search_indices": False,
        "allow_view": True,
        "allow_fine_tuning": False,
        "organization": "*",
        "group": None,
        "is_blocking": False,
    }


async def models(request: web.Request) -> web.Response:
    settings = request.app[SETTINGS]
    name = settings.served_model_name
    card = {
        "id": name,
        "object": "model",
        "created": int(time.time()),
        "owned_by": "vllm",
        "root": name,
        "parent": None,
        "max_model_len": request.app[DRIVERS][0].engine.max_model_len,
        "permission": [_permission(name)],
    }
    return web.json_response({"object": "list", "data": [card]})


async def metrics(request: web.Request) -> web.Response:
    drivers: list[RankDriver] = request.app[DRIVERS]
    body = render_metrics(drivers, request.app[SETTINGS].served_model_name)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})


def build_app(settings: ReplicaConfig, scenario: Scenario, token: str | None = None) -> web.Application:
    """The replica app; engines start when the app starts. ValueError for an unknown profile, or for
    `settings.require_token` without a `token` (TAO_TOKEN)."""
    middlewares = [error_middleware]
    if settings.require_token:
        if not token:
            raise ValueError("replica.require_token needs a token (set TAO_TOKEN)")
        middlewares.insert(0, agent_token_middleware(token, frozenset({"/health", "/metrics"})))
    app = web.Application(middlewares=middlewares, client_max_size=64 * 1024 * 1024)
    app[SETTINGS] = settings
    app[SCENARIO] = scenario
    app[DRIVERS] = build_drivers(settings)
    app[ROUND_ROBIN] = itertools.count()
    app[RENDER_CACHE] = RenderCache()
    app[VOCABULARY] = Vocabulary()
    app.cleanup_ctx.append(_run_drivers)
    app.router.add_get("/health", health)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/metrics", metrics)
    app.router.add_post("/v1/chat/completions", routes.chat_completions)
    app.router.add_post("/v1/completions", routes.completions)
    app.router.add_post("/v1/messages", routes.messages)
    app.router.add_post("/v1/responses", routes.responses)
    app.router.add_post("/v1/messages/count_tokens", routes.count_tokens)
    app.router.add_post("/tokenize", routes.tokenize)
    app.router.add_post("/detokenize", routes.detokenize)
    app.router.add_get("/version", routes.version)
    return app
