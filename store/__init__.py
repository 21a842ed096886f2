"""Tool-duration history and request log (SQLAlchemy); installed as tao_harness.store.

Modules: records (the frozen records other rooms hand in), models and migrations (tables, schema
version), engine (`open_store`, `StoreError`), writer (`StoreWriter`: batched background writes),
upsert (one batch, one transaction), redact (secrets out of command text), limits (what the columns can
hold, checked at the edge), queries (reads, prune),
transfer (CSV / JSON Lines export and import), synthetic (seeded realistic histories for demos and tests).
Nothing is imported here, so `import tao_harness.store` stays free of side effects.
"""
