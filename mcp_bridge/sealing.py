"""Sealing secrets at rest (OAuth grants): Fernet, with MultiFernet for key rotation.

Keys come from ``settings.ATRIUM_OAUTH_KEYS`` (Fernet keys, newest first). Without any, one
key is derived from ``SECRET_KEY`` with HKDF, so the embedded profile works out of the box;
changing ``SECRET_KEY`` then makes stored grants unreadable (members connect again).
A sealed value that no key opens reads as ``None``: callers treat it as "not connected".
"""

from __future__ import annotations

import base64
import json
from functools import cache, lru_cache
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

_DERIVATION_INFO = b"atrium oauth grants v1"


def derived_key(secret_key: str) -> bytes:
    """The Fernet key derived from ``SECRET_KEY`` (the embedded default)."""
    raw = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_DERIVATION_INFO).derive(
        secret_key.encode()
    )
    return base64.urlsafe_b64encode(raw)


@cache
def _fernet(keys: tuple[str, ...], secret_key: str) -> MultiFernet:
    material = [key.encode() for key in keys] or [derived_key(secret_key)]
    return MultiFernet([Fernet(key) for key in material])


def fernet() -> MultiFernet:
    return _fernet(tuple(getattr(settings, "ATRIUM_OAUTH_KEYS", ()) or ()), settings.SECRET_KEY)


def seal(value: dict[str, Any]) -> str:
    return fernet().encrypt(json.dumps(value, separators=(",", ":")).encode()).decode()


def unseal(token: str) -> dict[str, Any] | None:
    if not token:
        return None
    opened = _decrypted(fernet(), token)
    if opened is None:
        return None
    try:
        return json.loads(opened)  # a fresh object each time: callers may change theirs
    except ValueError:
        return None


@lru_cache(maxsize=1024)
def _decrypted(keys: MultiFernet, token: str) -> bytes | None:
    """A token's plaintext, by token and key set: a server row's sealed ``env`` is read with
    every request of its views (AES + HMAC each time, ~0.15 ms a call on a slow core). The
    plaintexts stay in this process's memory, as the open connections' settings already do."""
    try:
        return keys.decrypt(token.encode())
    except InvalidToken:
        return None


def reseal(token: str) -> str:
    """The same value sealed with the newest key (``MultiFernet.rotate``)."""
    return fernet().rotate(token.encode()).decode()
