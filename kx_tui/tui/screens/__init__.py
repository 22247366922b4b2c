"""The kx TUI's screens beyond the main one: passage detail, compare, help."""
