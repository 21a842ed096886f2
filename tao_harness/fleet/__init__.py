"""Fleet runs: scripted agent sessions replayed over real HTTP against a router under test."""
