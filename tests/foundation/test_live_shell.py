"""`LiveAtrium.shell`: one Django process runs a live server's snippets as `manage.py shell
-c` would (tests/live_shell.py) — so a test that seeds through it sees what a fresh process
would have done."""

from __future__ import annotations

import pytest

from chat.models import Workspace
from tests.live import LiveAtrium
from tests.live_shell import ShellError

pytestmark = pytest.mark.slow


def test_snippets_run_as_shell_c_would_in_one_process(tmp_path):
    server = LiveAtrium(var_dir=tmp_path / "var").setup()
    try:
        # Prints come back; standard input is the caller's; models are imported as the
        # shell imports them; the database is the server's.
        first = server.shell(
            "import os, sys\n"
            "print(os.getpid(), sys.stdin.read().upper())\n"
            "Workspace.objects.create(name='Acme', slug='acme')\n",
            input="seeded",
        )
        pid, echoed = first.split()
        assert echoed == "SEEDED"
        second = server.shell("import os; leftover = 1; print(os.getpid())")
        assert second.split() == [pid]  # the same process: no second Django start-up
        # Each snippet gets a fresh namespace, and reads what was committed before it.
        assert server.shell("print('leftover' in globals())").strip() == "False"
        slugs = server.read(
            lambda alias: list(Workspace.objects.using(alias).values_list("slug", flat=True))
        )
        assert slugs == ["acme"]

        # A snippet that raises fails the caller with its traceback; the next one runs.
        with pytest.raises(ShellError, match="ZeroDivisionError"):
            server.shell("print('half'); 1 / 0")
        with pytest.raises(ShellError, match="SystemExit"):
            server.shell("raise SystemExit(3)")
        assert server.shell("raise SystemExit(0)") == ""
        assert server.shell("print('still here')").strip() == "still here"

        # A snippet that ends the process fails its caller; the next snippet gets a new one.
        with pytest.raises(RuntimeError, match=r"ended \(exit 5\)"):
            server.shell("import os; os._exit(5)")
        restarted = server.shell("import os; print(os.getpid())").split()
        assert restarted != [pid]

        # A changed environment gets a process of its own.
        server.env = {**server.env, "ATRIUM_SHELL_PROBE": "1"}
        third = server.shell("import os; print(os.getpid(), os.environ['ATRIUM_SHELL_PROBE'])")
        assert third.split()[1] == "1" and third.split()[0] != restarted[0]
        assert server.shell("import os; print(os.getpid())").split() == third.split()[:1]
    finally:
        server.stop()
