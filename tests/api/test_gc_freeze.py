"""Start-up objects are frozen out of the cyclic collector while the app serves (full
collections then traverse only what requests allocate) and released when it stops, so that
apps started and stopped in one process leave nothing uncollectable behind."""

from __future__ import annotations

import gc

from api_support import running_client


def test_startup_objects_are_frozen_while_serving_and_released_at_shutdown(
    database_url: str,
) -> None:
    assert gc.get_freeze_count() == 0  # no other app serving in this process
    with running_client(database_url) as client:
        frozen = gc.get_freeze_count()
        # Catalogues, pydantic schemas, the ONNX session's wrappers, the app: far more than
        # the few thousand objects a request allocates.
        assert frozen > 50_000
        assert (
            client.post(
                "/v1/estimate",
                json={
                    "model": "google/gemma-2-2b",
                    "workload": {"batch_size": 1, "prompt_tokens": 64, "output_tokens": 16},
                    "hardware": {"gpu": "L4", "count": 1},
                },
            ).status_code
            == 200
        )
        # Requests freeze nothing more (frozen objects freed by reference counting leave it).
        assert gc.get_freeze_count() <= frozen
    assert gc.get_freeze_count() == 0
