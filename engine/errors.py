"""Status codes and the one exception type every layer speaks.

A `KxError` is what a user can cause and fix: it carries a status code (the
same names the CLI prints, the gateway maps to HTTP, and the SDK raises) and a
message that ends with what to do next.
"""

from __future__ import annotations

import enum


class Status(enum.Enum):
    """Failure classes, each with its CLI exit code and HTTP status."""

    INVALID_ARGUMENT = (3, 400)
    NOT_FOUND = (4, 404)
    FAILED_PRECONDITION = (5, 412)
    ALREADY_EXISTS = (6, 409)
    RESOURCE_EXHAUSTED = (7, 413)
    UNAUTHENTICATED = (8, 401)
    UNAVAILABLE = (9, 503)
    PERMISSION_DENIED = (11, 403)  # refused by policy (the gateway's Host/Origin checks, links out of a folder)
    DATA_LOSS = (12, 500)  # stored data is damaged: a server-side failure, but one with a name and a remedy
    INTERNAL = (10, 500)   # last of the 500s, so an unexplained HTTP 500 maps back to INTERNAL

    @property
    def exit_code(self) -> int:
        return self.value[0]

    @property
    def http_status(self) -> int:
        return self.value[1]


class KxError(Exception):
    """A failure the user can act on: a status and a message with a next step."""

    def __init__(self, status: Status, message: str) -> None:
        super().__init__(f"{status.name}: {message}")
        self.status = status
        self.message = message

    @property
    def code(self) -> str:
        """The status's name ("NOT_FOUND", ...), as the CLI prints it and the gateway sends it."""
        return self.status.name

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


def invalid(message: str) -> KxError:
    return KxError(Status.INVALID_ARGUMENT, message)


def not_found(message: str) -> KxError:
    return KxError(Status.NOT_FOUND, message)


def precondition(message: str) -> KxError:
    return KxError(Status.FAILED_PRECONDITION, message)
