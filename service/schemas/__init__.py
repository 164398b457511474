"""Pydantic models of every request and response body of the public contract (API.md)."""
