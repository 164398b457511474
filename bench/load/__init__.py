"""Open-loop HTTP load generation against a real uvicorn server (bench/load_test.py, soak.py)."""
