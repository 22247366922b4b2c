"""End-to-end tests: the real model, `kx` and extraction processes, servers on loopback, the
whole Textual app (their slow ones carry @pytest.mark.slow; tests/conftest.py marks the real model's users)."""
