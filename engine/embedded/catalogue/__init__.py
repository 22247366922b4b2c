"""The catalogue's parts, each over one SQLite connection; engine/embedded/store.py's `Catalogue` joins them."""
