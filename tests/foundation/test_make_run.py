"""`make run`'s script: migrates, bootstraps, serves the web server + a Celery worker, stops on Ctrl-C."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.live import ROOT, free_port
from tests.waiting import (
    OutputWatch,
    WaitTimeout,
    default_sigint,
    process_group_listing,
    wait_for_exit,
)

pytestmark = pytest.mark.slow


def test_run_script_serves_the_app_and_stops_cleanly_on_ctrl_c(tmp_path: Path):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "DJANGO_"))}
    for name in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "ATRIUM_PROFILE"):
        env.pop(name, None)  # make run is the embedded profile
    env.update({"PORT": str(port), "ATRIUM_VAR_DIR": str(tmp_path / "var")})
    with default_sigint():  # a terminal's Ctrl-C, even when this run ignores SIGINT
        proc = subprocess.Popen(
            ["bash", "scripts/run.sh"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    output = OutputWatch(proc)
    try:
        output.wait_for("Press Ctrl-C to stop", timeout=120)
        text = output.text()
        assert f"http://localhost:{port}/" in text, text
        credentials = re.search(r"Admin login: (\S+) / (\S+)", text)
        assert credentials, text
        with httpx.Client(base_url=f"http://localhost:{port}") as client:
            login = client.get("/login/")
            assert login.status_code == 200
            token = client.cookies["csrftoken"]
            response = client.post(
                "/login/",
                data={
                    "username": credentials.group(1),
                    "password": credentials.group(2),
                    "csrfmiddlewaretoken": token,
                },
                headers={"Referer": f"http://localhost:{port}/login/"},
                follow_redirects=True,
            )
            assert response.status_code == 200
            assert "Welcome" in response.text  # the demo thread
        worker_log = tmp_path / "var" / "log" / "celery.log"
        assert worker_log.exists()
    finally:
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal sends
        try:
            wait_for_exit(proc, timeout=30)  # run.sh kills what is left 10 s after SIGTERM
        except WaitTimeout as exc:
            # Evidence before the kill: what was still running, and what each process logged.
            processes = process_group_listing(proc.pid)
            os.killpg(proc.pid, signal.SIGKILL)
            logs = "\n".join(
                f"--- {log.name}\n{log.read_text(errors='replace')[-2000:]}"
                for log in sorted((tmp_path / "var" / "log").glob("*.log"))
            )
            raise AssertionError(
                f"run.sh still running 30 s after Ctrl-C\n{processes}\n{logs}"
            ) from exc
    rest = output.closed_text()
    assert proc.returncode == 0, rest
    assert "Stopped." in rest
    # Nothing left listening.
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://localhost:{port}/login/", timeout=2)
