"""The shared vLLM-like engine model: block pool with prefix caching, continuous batching, step-time profiles."""
