"""The embedded backend: datasets on disk (SQLite catalogue, voyager graph, whoosh BM25) and the Engine over them."""
