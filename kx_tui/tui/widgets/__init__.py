"""Reusable widgets of the kx TUI; each carries its own DEFAULT_CSS."""
