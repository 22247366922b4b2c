"""kx's embedded engine: datasets, ingest and retrieval, importable without any UI.

Importing this package loads neither Textual nor torch; the embedding model is
loaded the first time something is embedded.
"""

__version__ = "0.1.0"

from .backend import Backend  # noqa: E402
from .client import KxClient, RetrievalMode  # noqa: E402  (imports httpx only when a client is made)
from .config import Settings, load_settings  # noqa: E402
from .core import Engine  # noqa: E402
from .errors import KxError, Status  # noqa: E402

__all__ = ["Backend", "Engine", "KxClient", "KxError", "RetrievalMode", "Settings", "Status", "load_settings",
           "__version__"]
