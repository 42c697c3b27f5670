"""The Public Suffix List: which names are registries ("com", "co.uk", "github.io").

Used to tell sites apart (docs/sandbox.md) and to refuse CSP wildcards over a public suffix
(``*.co.uk`` names every site under it). The list is the operating system's copy (Debian
package ``publicsuffix``), or the file named by ``ATRIUM_PUBLIC_SUFFIX_LIST``. Without a
list nothing can be shown to be safe: callers fail closed (``load()`` returns None).

The algorithm is publicsuffix.org's: the longest matching rule wins, ``!`` exceptions beat
wildcards, and a name no rule matches has its last label as its public suffix (the
implicit ``*`` rule; this is why ``localhost``, absent from the list, is a suffix: every
``<key>.localhost`` is a site of its own).

Pure Python: imports nothing from the project.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

SYSTEM_LIST = Path("/usr/share/publicsuffix/public_suffix_list.dat")


@dataclass(frozen=True)
class PublicSuffixList:
    rules: frozenset[str]
    wildcards: frozenset[str]  # "ck" for the rule "*.ck"
    exceptions: frozenset[str]  # "www.ck" for the rule "!www.ck"

    @classmethod
    def parse(cls, text: str) -> PublicSuffixList:
        rules: set[str] = set()
        wildcards: set[str] = set()
        exceptions: set[str] = set()
        for line in text.splitlines():
            rule = line.strip().split(" ", 1)[0].lower()
            if not rule or rule.startswith("//"):
                continue
            rule = rule.encode("idna").decode("ascii") if not rule.isascii() else rule
            if rule.startswith("!"):
                exceptions.add(rule[1:])
            elif rule.startswith("*."):
                wildcards.add(rule[2:])
            else:
                rules.add(rule)
        return cls(frozenset(rules), frozenset(wildcards), frozenset(exceptions))

    def public_suffix(self, host: str) -> str:
        """The public suffix of a lower-case, dot-free-ended host name."""
        labels = host.split(".")
        for start in range(len(labels)):
            candidate = ".".join(labels[start:])
            if candidate in self.exceptions:
                return ".".join(labels[start + 1 :])
            if candidate in self.rules:
                return candidate
            parent = ".".join(labels[start + 1 :])
            if start + 1 < len(labels) and parent in self.wildcards:
                return candidate
        return labels[-1]

    def is_public_suffix(self, host: str) -> bool:
        return self.public_suffix(host) == host

    def site_of(self, host: str) -> str:
        """The registrable domain (public suffix + one label), or the host itself when it
        is a public suffix: what browsers compare to decide "same site"."""
        suffix = self.public_suffix(host)
        if suffix == host:
            return host
        head = host[: -len(suffix) - 1].rsplit(".", 1)[-1]
        return f"{head}.{suffix}"


def list_path() -> Path:
    return Path(os.environ.get("ATRIUM_PUBLIC_SUFFIX_LIST") or SYSTEM_LIST)


@lru_cache(maxsize=1)
def load() -> PublicSuffixList | None:
    """The list, read once; None when the file is missing (callers fail closed)."""
    try:
        return PublicSuffixList.parse(list_path().read_text(encoding="utf-8"))
    except OSError:
        return None
