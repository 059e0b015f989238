"""Every test compiles into a fresh code cache of its own session (never the user's)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session", autouse=True)
def private_cache() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="dlvm-cache-") as folder:
        old = os.environ.get("DLVM_CACHE_DIR")
        os.environ["DLVM_CACHE_DIR"] = folder
        try:
            yield folder
        finally:
            if old is None:
                os.environ.pop("DLVM_CACHE_DIR", None)
            else:
                os.environ["DLVM_CACHE_DIR"] = old
