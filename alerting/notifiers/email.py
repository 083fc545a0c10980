"""E-mail over SMTP (plain, STARTTLS or SSL, with an optional login).

The Message-ID is derived from the notification id, so a mail sent again after a crash can be
recognised as the same one.
"""

from __future__ import annotations

import re
import smtplib
import ssl
from email.message import EmailMessage
from email.utils import formatdate

from alerting.config import EmailChannel
from alerting.errors import DeliveryError
from alerting.notifiers.base import Notification, Notifier


def email_message(n: Notification, spec: EmailChannel) -> EmailMessage:
    """Return the mail for ``n``: subject ``[CRIT] rule tags``, a text body with the details."""
    msg = EmailMessage()
    msg["Subject"] = n.title
    msg["From"] = spec.sender
    msg["To"] = ", ".join(spec.to)
    msg["Date"] = formatdate(n.at, usegmt=True)
    msg["Message-ID"] = f"<{re.sub(r'[^A-Za-z0-9.-]', '.', n.id)}@daggers.alerts>"
    msg["X-Daggers-Dedup-Key"] = n.dedup_key
    lines = [
        n.message,
        "",
        f"rule:      {n.rule}",
        f"team:      {n.team}",
        f"level:     {n.previous_level} -> {n.level}",
    ]
    if n.value is not None:
        lines.append(f"value:     {n.value:.6g}")
    if n.condition:
        lines.append(f"condition: {n.condition}")
    lines += [f"{k + ':':<10} {v}" for k, v in sorted(n.tags.items())]
    lines += [
        "",
        f"at:        {n.iso(n.at)}",
        f"since:     {n.iso(n.started_at)}",
        f"dedup key: {n.dedup_key}",
    ]
    msg.set_content("\n".join(lines) + "\n")
    return msg


class EmailNotifier(Notifier):
    """Sends one mail per notification. SMTP 4xx and connection problems are retried; 5xx are final."""

    type = "email"

    def __init__(self, name: str, spec: EmailChannel, timeout: float = 10.0) -> None:
        super().__init__(name, timeout)
        self.spec = spec

    def _connect(self) -> smtplib.SMTP:
        s = self.spec
        if s.security == "ssl":
            return smtplib.SMTP_SSL(
                s.host, s.port, timeout=self.timeout, context=ssl.create_default_context()
            )
        smtp = smtplib.SMTP(s.host, s.port, timeout=self.timeout)
        if s.security == "starttls":
            smtp.starttls(context=ssl.create_default_context())
        return smtp

    def send(self, notification: Notification) -> None:
        where = f"smtp://{self.spec.host}:{self.spec.port}"
        try:
            with self._connect() as smtp:
                if self.spec.username:
                    password = self.spec.password.get_secret_value() if self.spec.password else ""
                    smtp.login(self.spec.username, password)
                smtp.send_message(email_message(notification, self.spec))
        except smtplib.SMTPAuthenticationError as exc:
            raise DeliveryError(
                f"email channel {self.name!r}: {where} refused the login ({exc.smtp_code})", retryable=False
            ) from None
        except smtplib.SMTPRecipientsRefused as exc:
            codes = sorted({code for code, _ in exc.recipients.values()})
            raise DeliveryError(
                f"email channel {self.name!r}: {where} refused every recipient ({codes})",
                retryable=all(400 <= c < 500 for c in codes),
            ) from None
        except smtplib.SMTPResponseException as exc:
            text = (
                exc.smtp_error.decode(errors="replace")
                if isinstance(exc.smtp_error, bytes)
                else str(exc.smtp_error)
            )
            raise DeliveryError(
                f"email channel {self.name!r}: {where} answered {exc.smtp_code} {text[:200]}",
                retryable=400 <= exc.smtp_code < 500,
            ) from None
        except (smtplib.SMTPException, OSError) as exc:
            raise DeliveryError(
                f"email channel {self.name!r}: cannot send through {where} ({type(exc).__name__}: {exc})",
                retryable=True,
            ) from None

    def secrets(self) -> list[str]:
        return [self.spec.password.get_secret_value()] if self.spec.password else []

    def describe(self) -> str:
        return f"email smtp://{self.spec.host}:{self.spec.port} to {', '.join(self.spec.to)}"
