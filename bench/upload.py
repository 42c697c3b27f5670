"""A 200 MiB upload through the web process (DESIGN §9, issue 26).

A member's upload, as the browser makes it: ``POST /media/uploads/<thread>/`` (session,
CSRF, the declared size against the limits) returns a ticket URL; the body is then
``PUT`` there by ``curl`` and streamed to staging by ``chat.media.uploads`` (a staged
``MediaAsset`` with its audit row is the answer). The floor, in the same run and the same
web process: the same file ``PUT`` by the same ``curl`` to ``/media/uploads/_sink/``, a
plain upload endpoint (each chunk written to a file in the same folder as it arrives; no
session, checks, sniffing or database) — only with ``ATRIUM_BENCH_ENDPOINTS=1``. Also
reported, not budgeted: ``/media/uploads/_sink/discard/``, which reads the body and throws
it away (what the socket alone gives; above this machine's page-cache write rate). Runs
alternate, three each after a warm-up; throughput is the median.

Memory: the web process's peak RSS (VmHWM, reset just before) minus its RSS before each
upload; the budget is a flat 16 MiB (the body never sits whole in memory).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx

from .harness import BenchAtrium, Seeded

MIB = 1024 * 1024
RUNS = 5


def make_file(path: Path, megabytes: int) -> Path:
    """Incompressible bytes (a repeated random block: no page-cache or gzip shortcut)."""
    block = os.urandom(MIB)
    with open(path, "wb") as out:
        for _ in range(megabytes):
            out.write(block)
    return path


def _curl_put(url: str, path: Path, cookie: str = "") -> tuple[float, int, str]:
    command = [
        "curl",
        "-sS",
        "-o",
        "-",
        "-w",
        "\n%{time_total} %{http_code}",
        "-H",
        "Expect:",  # no 100-continue round trip (browsers do not wait for one either)
        "-H",
        "Content-Type: application/octet-stream",
        "-X",
        "PUT",
        "--data-binary",  # not -T: curl would append the file's name to a URL ending in /
        f"@{path}",
        url,
    ]
    if cookie:
        command[1:1] = ["-b", cookie]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=True)
    body, _, tail = done.stdout.rpartition("\n")
    seconds, status = tail.split()
    return float(seconds), int(status), body


def _ticket(server: BenchAtrium, seeded: Seeded, size: int) -> tuple[str, str]:
    """A ticket URL for one body of ``size`` bytes, as the composer gets it; the cookie."""
    origin = server.app_origin
    thread = seeded.threads[0]
    with httpx.Client(base_url=origin, cookies={"sessionid": seeded.cookies[0]}) as client:
        page = client.get(f"/w/{seeded.workspace}/t/{thread}/")
        page.raise_for_status()
        csrf = client.cookies.get("csrftoken") or ""
        answer = client.post(
            f"/media/uploads/{thread}/",
            json={"filename": "bench.bin", "size": size},
            headers={"X-CSRFToken": csrf, "Origin": origin, "Referer": origin + "/"},
        )
        answer.raise_for_status()
        body = answer.json()
        assert body["ok"], body
        return origin + body["uploadUrl"], f"sessionid={seeded.cookies[0]}"


def _remove_staged_uploads(server: BenchAtrium) -> None:
    """The previous run's staged upload goes just before the next one, as the sink removes
    its previous file: both writers then start from the same page cache. (No worker runs
    here to persist and remove it. Kept, it made every upload fault in 200 MiB of fresh
    pages — costly in this machine's VM — while the sink reused its own: bench/README.md.)"""
    for path in (server.var_dir / "staging").glob("*"):
        if path.is_file() and not path.name.startswith("bench-sink"):
            path.unlink()


def run(server: BenchAtrium, seeded: Seeded, *, work: Path, megabytes: int = 200) -> dict[str, Any]:
    path = make_file(work / "upload.bin", megabytes)
    size = path.stat().st_size
    sink = f"{server.app_origin}/media/uploads/_sink/"
    discard = f"{server.app_origin}/media/uploads/_sink/discard/"
    small = make_file(work / "warm.bin", 4)
    for _ in range(2):  # warm every path (imports, first statements)
        _curl_put(sink, small)
        _curl_put(discard, small)
        url, cookie = _ticket(server, seeded, small.stat().st_size)
        _curl_put(url, small, cookie)
    # One unmeasured full-size round: both writers then have a previous file to replace
    # (the first measured upload would otherwise fault in fresh pages the sink does not).
    _curl_put(sink, path)
    url, cookie = _ticket(server, seeded, size)
    _curl_put(url, path, cookie)
    sink_s: list[float] = []
    discard_s: list[float] = []
    upload_s: list[float] = []
    growth: list[float] = []
    for _ in range(RUNS):
        seconds, status, _ = _curl_put(sink, path)
        assert status == 200, status
        sink_s.append(seconds)
        seconds, status, _ = _curl_put(discard, path)
        assert status == 200, status
        discard_s.append(seconds)
        url, cookie = _ticket(server, seeded, size)
        time.sleep(0.2)
        _remove_staged_uploads(server)
        before = server.status("VmRSS")
        server.reset_peak_rss()
        seconds, status, body = _curl_put(url, path, cookie)
        assert status == 201, (status, body[:300])
        growth.append((server.status("VmHWM") - before) / 1024)
        upload_s.append(seconds)
    sink_mbps = size / MIB / statistics.median(sink_s)
    upload_mbps = size / MIB / statistics.median(upload_s)
    return {
        "megabytes": megabytes,
        "runs": RUNS,
        "sink_s": sink_s,
        "discard_s": discard_s,
        "upload_s": upload_s,
        "sink_mib_per_s": round(sink_mbps, 1),
        "discard_mib_per_s": round(size / MIB / statistics.median(discard_s), 1),
        "upload_mib_per_s": round(upload_mbps, 1),
        "throughput_ratio": round(upload_mbps / sink_mbps, 3),
        "rss_growth_mib": round(max(growth), 2),
        "rss_growth_runs_mib": [round(g, 2) for g in growth],
    }
