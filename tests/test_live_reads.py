"""``LiveAtrium.read`` reads the database of the server it is called on.

CI once failed five browser tests that waited for audit rows the server had written: a
later live server in the same test process had got an earlier one's port, and reads were
keyed by port, so they went to the earlier server's (stopped) database."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from django.db import connections

from tests.live import LiveAtrium


def _server_with_value(var_dir: Path, port: int, value: str) -> LiveAtrium:
    var_dir.mkdir(parents=True)
    with sqlite3.connect(var_dir / "atrium.sqlite3") as db:
        db.execute("CREATE TABLE marker (value TEXT)")
        db.execute("INSERT INTO marker VALUES (?)", (value,))
    # Named by URL, as a production-profile server's database is (an empty URL would take
    # the suite's own engine, PostgreSQL in the production pass, for an SQLite file).
    server = LiveAtrium(var_dir=var_dir, port=port)
    server.env = {"DATABASE_URL": f"sqlite:///{var_dir / 'atrium.sqlite3'}"}
    return server


def _marker(alias: str) -> str:
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT value FROM marker")
        return str(cursor.fetchone()[0])


def test_a_later_server_on_an_earlier_servers_port_reads_its_own_database(tmp_path: Path) -> None:
    earlier = _server_with_value(tmp_path / "earlier", 40123, "earlier")
    later = _server_with_value(tmp_path / "later", 40123, "later")
    assert earlier.read(_marker) == "earlier"
    assert later.read(_marker) == "later"
