"""Watched folders: files dropped into a folder become documents of a dataset."""
