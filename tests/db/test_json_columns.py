"""JSON columns are written by orjson, with the standard library for what orjson refuses."""

from __future__ import annotations

import json

import numpy as np

from service.db.engine import dump_json


def test_documents_round_trip_and_refused_values_fall_back() -> None:
    document = {"gpu_j": 1242.8810574182978, "warnings": [], "nested": {"a": None, "b": True}}
    assert json.loads(dump_json(document)) == document
    assert dump_json({"x": 0.1}) == '{"x":0.1}'  # orjson: compact, shortest round-trip floats
    # a numpy float is a float subclass orjson refuses; an int key is refused too
    assert json.loads(dump_json({"j": np.float64(2.5), 3: "three"})) == {"j": 2.5, "3": "three"}
