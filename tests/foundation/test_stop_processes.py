"""scripts/lib/processes.sh: how `make run` and the fleet stop what they started."""

from __future__ import annotations

import subprocess

from tests.live import ROOT

# One child that stops on SIGTERM, one that ignores it (a process stuck in its shutdown).
SCRIPT = """
set -euo pipefail
source scripts/lib/processes.sh
sleep 600 &
polite=$!
bash -c 'trap "" TERM; echo ready; while :; do sleep 0.05; done' > "$READY" &
stubborn=$!
until [ -s "$READY" ]; do sleep 0.05; done
stop_processes 1 "$polite" "$stubborn"
echo "polite: $(ps -o stat= -p "$polite" || echo gone)"
echo "stubborn: $(ps -o stat= -p "$stubborn" || echo gone)"
"""


def test_stop_processes_terminates_and_kills_what_ignores_sigterm(tmp_path):
    result = subprocess.run(
        ["bash", "-c", SCRIPT],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "READY": str(tmp_path / "ready")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "polite: gone" in result.stdout
    assert "stubborn: gone" in result.stdout
    # Only the one that had to be killed is named, with its command line.
    assert "killed: bash -c trap" in result.stderr, result.stderr
    assert "sleep 600" not in result.stderr
