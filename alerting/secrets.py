"""Keeping secrets (webhook URLs, routing keys, passwords) out of logs, errors and the store.

:class:`Redactor` replaces every known secret in a text with ``***``; :class:`RedactingFilter`
applies it to log records of the loggers that could see a secret (ours, urllib3's request lines,
APScheduler's). Secrets shorter than 4 characters are not redacted (they would mangle ordinary text).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from urllib.parse import unquote, urlsplit

from pydantic import SecretStr

MASK = "***"
MIN_SECRET = 4
#: Loggers a RedactingFilter is put on by :func:`install`.
GUARDED_LOGGERS = (
    "daggers.alerts",
    "urllib3.connectionpool",
    "apscheduler",
    "apscheduler.executors.default",
    "apscheduler.scheduler",
    "requests",
)


def url_secrets(url: str) -> list[str]:
    """Return the secret parts of a URL: the whole URL, its path and query, and any user info."""
    parts = urlsplit(url)
    found = [url]
    if parts.path not in ("", "/"):
        found += [parts.path, unquote(parts.path)]
    if parts.query:
        found.append(parts.query)
    if parts.password:
        found.append(parts.password)
    return found


def public_url(url: str) -> str:
    """Return only ``scheme://host[:port]`` of a URL (what may be shown of a secret endpoint)."""
    parts = urlsplit(url)
    host = parts.hostname or "?"
    return f"{parts.scheme}://{host}{f':{parts.port}' if parts.port else ''}"


class Redactor:
    """Replaces known secrets in text. Thread-safe; secrets can be added at any time."""

    def __init__(self, secrets: Iterable[str | SecretStr | None] = ()) -> None:
        self._lock = threading.Lock()
        self._secrets: list[str] = []
        self.add(secrets)

    def add(self, secrets: Iterable[str | SecretStr | None]) -> None:
        """Add secrets (plain or SecretStr; None and short ones are skipped)."""
        with self._lock:
            for s in secrets:
                value = s.get_secret_value() if isinstance(s, SecretStr) else s
                if value and len(value) >= MIN_SECRET and value not in self._secrets:
                    self._secrets.append(value)
            self._secrets.sort(key=len, reverse=True)  # the whole URL before its path

    def __call__(self, text: str) -> str:
        """Return ``text`` with every known secret replaced by ``***``."""
        with self._lock:
            secrets = list(self._secrets)
        for s in secrets:
            if s in text:
                text = text.replace(s, MASK)
        return text

    def __len__(self) -> int:
        return len(self._secrets)


class RedactingFilter(logging.Filter):
    """A logging filter that redacts the message of each record (formatting it first)."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__("redact")
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a record whose args do not fit its format: leave it to logging
            return True
        clean = self.redactor(message)
        if clean != message:
            record.msg, record.args = clean, ()
        if record.exc_info and record.exc_info[1] is not None:
            text = self.redactor(logging.Formatter().formatException(record.exc_info))
            record.exc_info, record.exc_text = None, text
        return True


def install(
    redactor: Redactor, loggers: Iterable[str] = GUARDED_LOGGERS
) -> list[tuple[logging.Logger, RedactingFilter]]:
    """Put a RedactingFilter on each named logger; return them so :func:`uninstall` can take them off."""
    installed = []
    for name in loggers:
        logger = logging.getLogger(name)
        flt = RedactingFilter(redactor)
        logger.addFilter(flt)
        installed.append((logger, flt))
    return installed


def uninstall(installed: Iterable[tuple[logging.Logger, RedactingFilter]]) -> None:
    """Remove filters put on by :func:`install`."""
    for logger, flt in installed:
        logger.removeFilter(flt)
