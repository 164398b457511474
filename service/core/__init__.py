"""The pure analytical core: kernel graph, operation and byte counts, roofline, power.

Nothing here imports the web framework, the database, settings or does I/O: every function
takes plain numbers and frozen dataclasses and returns the same, so it can be tested and
type-checked on its own and vectorised later.
"""
