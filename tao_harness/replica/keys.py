"""Typed application state keys shared by the replica's app factory and its handlers."""

from __future__ import annotations

import itertools

from aiohttp import web

from tao_harness.config import ReplicaConfig
from tao_harness.replica.generation import RankDriver
from tao_harness.replica.scenario import Scenario
from tao_harness.replica.template import RenderCache
from tao_harness.replica.tokenizer import Vocabulary

SETTINGS: web.AppKey[ReplicaConfig] = web.AppKey("replica_settings")
SCENARIO: web.AppKey[Scenario] = web.AppKey("replica_scenario")
DRIVERS: web.AppKey[list[RankDriver]] = web.AppKey("replica_drivers")
ROUND_ROBIN: web.AppKey[itertools.count[int]] = web.AppKey("replica_round_robin")
RENDER_CACHE: web.AppKey[RenderCache] = web.AppKey("replica_render_cache")
VOCABULARY: web.AppKey[Vocabulary] = web.AppKey("replica_vocabulary")
