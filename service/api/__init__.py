"""The HTTP layer: routes validate, call the service, and return a schema."""
