"""The one error of the authority services: a refused change, with a code for the client."""

from __future__ import annotations


class BindingError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
