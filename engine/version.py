"""kx's version, as installed: one number, in pyproject.toml, read through the package metadata."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("kx")
except PackageNotFoundError:  # a source tree run without `pip install -e .`
    __version__ = "0+unknown"
