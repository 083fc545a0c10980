"""Read a resource named by a URL: ``http(s)://``, ``file://`` or a plain path (no other schemes)."""

from __future__ import annotations

import urllib.parse
import urllib.request
from pathlib import Path


def is_url(text: str) -> bool:
    """Return whether ``text`` is an ``http(s)://`` or ``file://`` URL (else a path)."""
    return urllib.parse.urlsplit(text).scheme in ("http", "https", "file")


def as_url(text: str) -> str:
    """Return ``text`` as a URL without a trailing slash: a path becomes ``file://``."""
    return text.rstrip("/") if is_url(text) else Path(text).resolve().as_uri()


def read_url(url: str, timeout_s: float = 10.0) -> bytes:
    """Return the bytes at ``url``; raise OSError that names it (missing file, HTTP error, timeout)."""
    try:
        if not is_url(url):
            return Path(url).read_bytes()
        if url.startswith("file://"):
            return Path(urllib.request.url2pathname(urllib.parse.urlsplit(url).path)).read_bytes()
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:  # noqa: S310 (http/https only)
            return bytes(resp.read())
    except (OSError, ValueError) as exc:
        raise OSError(f"cannot read {url}: {exc}") from None
