"""`tao replica`: the engine model in real time behind an OpenAI + Anthropic compatible HTTP server."""
