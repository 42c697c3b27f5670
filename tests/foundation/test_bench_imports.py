"""`make bench` starts from a plain interpreter (no Django settings yet): its modules, and
the test helpers they share, must import there."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.live import ROOT


def test_the_benchmarks_import_without_django_settings() -> None:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    result = subprocess.run(
        [sys.executable, "-c", "import bench.run"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
