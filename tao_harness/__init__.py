"""tao_harness: tool-aware scheduling and telemetry for LLM agent sessions.

Importing the package has no side effects. Rooms (see ../shared/STYLE.md):
readiness/ hint parsing and tool-duration prediction; planner/ the DP and BFD; policies/ TAO and the
baselines; engine/ the vLLM-like engine model; replica/ the emulated vLLM server; coordinator/ and
proxy/ the live system; sim/ the discrete-event simulator; cli/ thin command modules;
tao_harness.store the SQLAlchemy history; tao_harness.shims the per-harness adapters.
"""

__version__ = "0.1.0"
