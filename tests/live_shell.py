"""A live server's Django shell kept open between snippets (`LiveAtrium.shell`).

`manage.py shell -c CODE` starts Django anew for every snippet (≈ 1.6 s on this project's
machines, and the live-server tests seed and inspect their servers through a few hundred
snippets a run). This process starts Django once, in the live server's environment, and
runs each snippet as `shell -c` would: in a fresh namespace with the shell command's
globals and its automatic model imports, its `print`s returned, its standard input the
caller's text. After each snippet the database connections close, as at the end of a
process, so the next one reads what the server wrote meanwhile.

Requests and answers are JSON lines on a private copy of the process's stdin/stdout; the
snippet's own stdout is captured, and anything written to file descriptor 1 directly goes to
stderr (`shell.log` in the server's var folder).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


class ShellError(RuntimeError):
    """A snippet raised: its traceback, as `manage.py shell` printed it on stderr."""


class ShellSession:
    """The client side: one helper process for one environment."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.env = dict(env)
        self.log = log
        with open(log, "ab") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tests.live_shell"],
                cwd=ROOT,
                env=self.env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
            )

    def run(self, code: str, input: str | None = None) -> str:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps({"code": code, "input": input or ""}) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            tail = self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""
            raise RuntimeError(f"the shell helper ended (exit {self.process.wait()}):\n{tail}")
        answer: dict[str, Any] = json.loads(line)
        if not answer["ok"]:
            raise ShellError(f"manage.py shell -c failed:\n{answer['error']}")
        return str(answer["stdout"])

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()  # the helper ends at the end of its input
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def main() -> None:
    requests = os.fdopen(os.dup(0), "r")
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # a snippet's direct writes to fd 1 must not corrupt the answers
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    import django

    django.setup()
    from django.core.management.commands import shell
    from django.db import connections

    base = {**vars(shell), **shell.Command().get_namespace(verbosity=0)}
    for line in requests:
        request = json.loads(line)
        out = io.StringIO()
        answer: dict[str, Any] = {"ok": True}
        sys.stdin = io.StringIO(request["input"])
        try:
            with contextlib.redirect_stdout(out):
                exec(request["code"], dict(base))  # noqa: S102 — the test's own snippet
        except SystemExit as exc:
            if exc.code not in (None, 0):
                answer = {"ok": False, "error": f"SystemExit({exc.code!r})"}
        except BaseException:  # noqa: BLE001 — reported to the caller, as a process would
            answer = {"ok": False, "error": traceback.format_exc()}
        finally:
            sys.stdin = sys.__stdin__
            connections.close_all()
        answer["stdout"] = out.getvalue()
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


if __name__ == "__main__":
    main()
