"""mini-SWE-agent shim: a stdlib-only launcher (pythonpath/) that wraps Environment.execute in mini's own process."""
