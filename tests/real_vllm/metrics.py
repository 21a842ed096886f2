"""Reading a real vLLM server's /metrics in the tests (per engine, as vLLM labels them)."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families


def samples(text: str, name: str) -> dict[str, dict[str, str | float]]:
    """engine label → the sample's labels and value ("value"), for the samples named `name`."""
    out: dict[str, dict[str, str | float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                out[sample.labels.get("engine", "")] = {**sample.labels, "value": sample.value}
    return out


def value(text: str, name: str, engine: int | str = 0) -> float:
    return float(samples(text, name)[str(engine)]["value"])
