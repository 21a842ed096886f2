"""Tool-duration history and request log (SQLAlchemy); installed as tao_harness.store."""
