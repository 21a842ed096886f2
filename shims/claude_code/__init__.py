"""Claude Code shim: http hooks in a temporary --settings file, LLM traffic through the proxy."""
