"""Unit tests: no embedding model, no processes, no servers: `python -m pytest tests/unit`."""
