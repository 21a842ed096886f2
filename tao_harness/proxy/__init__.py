"""`tao proxy`: session identity, admission, replica pinning and streaming pass-through for agents' LLM calls."""
