"""The shared vLLM-like engine model: block pool with prefix caching, continuous batching, step-time profiles.

`EngineCore` (core.py) is driven by `tao replica` in real time and by the simulator in virtual time;
`profiles.py` names the step-time fits; `hashing.py` lets callers precompute block-hash chains.
"""

from tao_harness.engine.api import EngineConfig, EngineMetrics, EngineRequest, RequestOutput, StepOutput
from tao_harness.engine.core import EngineCore
from tao_harness.engine.profiles import PROFILES, StepTimeProfile, get_profile

__all__ = [
    "PROFILES",
    "EngineConfig",
    "EngineCore",
    "EngineMetrics",
    "EngineRequest",
    "RequestOutput",
    "StepOutput",
    "StepTimeProfile",
    "get_profile",
]
