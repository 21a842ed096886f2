"""OpenCode shim: a JS plugin (package data) and a proxy provider via OPENCODE_CONFIG_CONTENT."""
