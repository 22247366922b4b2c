"""Extractors that misbehave, for the worker pool's tests (resolved by import path in a worker).

`by_name` reads a PDF as usual unless the document's name asks for trouble:
"sleepy" hangs, "crashy" kills its own process the way a segfaulting parser
would, "hungry" allocates until the memory limit stops it.
"""

from __future__ import annotations

import os
import signal
import time

from engine.extract.base import Extracted, Limits
from engine.extract.pdf import extract_pdf


def by_name(data: bytes, label: str, limits: Limits) -> Extracted:
    name = os.path.basename(label)
    if "sleepy" in name:
        time.sleep(3600)
    if "crashy" in name:
        os.kill(os.getpid(), signal.SIGSEGV)
    if "hungry" in name:
        hoard = []
        while True:
            hoard.append(bytearray(64 * 2**20))
    return extract_pdf(data, label, limits)


def reporting(data: bytes, label: str, limits: Limits) -> Extracted:
    """Reports three steps through the worker's channel (as OCR reports its pages), then reads the bytes as text."""
    from engine.extract.base import report

    for page in range(3):
        report(f"reading {label}: OCR page {page + 1}/3", page, 3)
    return Extracted(text=data.decode(), media_type="text/plain", extractor="reporting")
