"""The model catalogue's build: published config files from PyPI packages read into catalogue
entries (``python -m offline.catalog``; see docs/catalog/models.md)."""
