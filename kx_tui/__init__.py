"""kx's faces for people and scripts: the `kx` CLI and (later) the Textual app."""
