"""Per-harness adapters (Claude Code, OpenCode, mini-SWE-agent); installed as tao_harness.shims."""
