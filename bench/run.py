"""One profile's benchmarks: `python -m bench.run --profile embedded|production`.

`make bench` (bench/__main__.py) runs this once per profile with the right environment.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from . import (
    budgets,
    concurrency,
    fanout,
    fleet,
    media,
    render,
    roundtrip,
    throughput,
    upload,
    viewmount,
    worker_events,
)
from .harness import BOARD, MEDIA, BenchAtrium, Seeded, seed, stdio_server

RESULTS = Path(__file__).resolve().parent / "results"


def _slice(seeded: Seeded, threads: list[int]) -> Seeded:
    return Seeded(
        workspace=seeded.workspace,
        threads=threads,
        cookies=seeded.cookies,
        servers=seeded.servers,
        users=seeded.users,
    )


def _log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> dict[str, Any]:
    production = args.profile == "production"
    if production and not os.environ.get("DATABASE_URL"):
        raise SystemExit(
            "the production profile needs DATABASE_URL/REDIS_URL (see bench/README.md)"
        )
    if not production:
        for key in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "ATRIUM_PROFILE"):
            os.environ.pop(key, None)
    work = Path(tempfile.mkdtemp(prefix=f"atrium-bench-{args.profile}-"))
    extra: dict[str, str] = {"LOG_LEVEL": "WARNING"}
    # The bench measures the request path, not the rate limits (bindings.ratelimit).
    extra["ATRIUM_RATE_LIMITS"] = json.dumps(
        {kind: [10**6, 10**6] for kind in ("view_request", "user_view_request", "tool_call")}
    )
    if production:
        # Our own Redis database numbers: LiveAtrium's defaults (5/6) are shared with
        # whatever live tests run on this machine, and a channel layer must not be shared.
        from urllib.parse import urlsplit, urlunsplit

        redis = urlsplit(os.environ["REDIS_URL"])
        extra["REDIS_URL"] = urlunsplit(redis._replace(path=f"/{args.redis_db}"))
        extra["CELERY_BROKER_URL"] = urlunsplit(redis._replace(path=f"/{args.redis_db + 1}"))
    results: dict[str, Any] = {
        "profile": args.profile,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "loadavg_start": os.getloadavg(),
        },
        "parameters": vars(args),
    }
    state = str(work / "board.json")
    server = BenchAtrium(var_dir=work / "var", extra_env=extra).setup()
    spy: subprocess.Popen | None = None
    try:
        threads = 2 + args.threads + args.threads + 1
        seeded = seed(
            server,
            members=max(args.clients, fanout.MEMBERS),
            threads=threads,
            servers={"board": stdio_server(BOARD, BOARD_STATE_FILE=state)},
        )
        server.start()
        spy = _py_spy(server, args.py_spy)
        rt_thread, fo_thread = seeded.threads[0], seeded.threads[1]
        cc_threads = seeded.threads[2 : 2 + args.threads]
        tp_threads = seeded.threads[2 + args.threads : 2 + 2 * args.threads]
        render_thread = seeded.threads[-1]
        if "roundtrip" in args.only:
            _log(f"roundtrip: {args.calls} host + {args.calls} direct calls")
            results["roundtrip"] = asyncio.run(
                roundtrip.run(
                    server, _slice(seeded, [rt_thread]), calls=args.calls, state_file=state
                )
            )
        if "fanout" in args.only:
            _log(f"fanout: {args.rounds} results to {fanout.MEMBERS} members")
            results["fanout"] = asyncio.run(
                fanout.run(server, _slice(seeded, [fo_thread]), rounds=args.rounds)
            )
        if "concurrency" in args.only:
            _log(f"concurrency: {args.clients} clients x {args.per_client} calls")
            results["concurrency"] = asyncio.run(
                concurrency.run(
                    server, _slice(seeded, cc_threads), clients=args.clients, calls=args.per_client
                )
            )
        if "throughput" in args.only:
            _log(f"throughput: {args.clients} clients, open-loop rate steps to p99 > 100 ms")
            results["throughput"] = asyncio.run(
                throughput.run(
                    server,
                    _slice(seeded, tp_threads),
                    clients=args.clients,
                    start_rate=args.start_rate,
                    factor=args.rate_factor,
                    step_s=args.step_seconds,
                    max_rate=args.max_rate,
                    processes=args.generator_processes,
                )
            )
        if "render" in args.only and not production:
            _log("render: 500 messages, 100 views")
            results["render"] = render.run(server, _slice(seeded, [render_thread]))
    finally:
        if spy is not None:
            spy.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
            spy.wait(timeout=120)
        server.stop()
        server.drop_database()
    if "viewmount" in args.only and not production:
        _log(f"viewmount: {args.view_samples} basic-vanillajs views in Chromium")
        view_server = BenchAtrium(var_dir=work / "viewmount-var", extra_env=extra).setup()
        try:
            view_seed = seed(
                view_server,
                members=1,
                threads=viewmount.WARMUP + args.view_samples,
                servers={"basic": viewmount.server_spec()},
            )
            view_server.start()
            results["viewmount"] = viewmount.run(view_server, view_seed, samples=args.view_samples)
        finally:
            view_server.stop()
            view_server.drop_database()
    if "worker_events" in args.only:
        _log(f"worker_events: {args.worker_calls} media results stored by a worker")
        events_server = BenchAtrium(var_dir=work / "events-var", extra_env=extra).setup()
        try:
            events_seed = seed(
                events_server, members=2, threads=1, servers={"media": stdio_server(MEDIA)}
            )
            events_server.start()
            worker = events_server.start_worker()
            results["worker_events"] = asyncio.run(
                worker_events.run(
                    events_server, events_seed, worker_pid=worker.pid, calls=args.worker_calls
                )
            )
        finally:
            events_server.stop()
            events_server.drop_database()
    if "media" in args.only:
        _log(f"media: {args.megabytes} MB get_large")
        media_server = BenchAtrium(var_dir=work / "media-var", extra_env=extra).setup()
        try:
            media_seed = seed(
                media_server, members=1, threads=1, servers={"media": stdio_server(MEDIA)}
            )
            media_server.start(worker=True)
            results["media"] = asyncio.run(
                media.run(media_server, media_seed, megabytes=args.megabytes)
            )
        finally:
            media_server.stop()
            media_server.drop_database()
    if "upload" in args.only:
        _log(f"upload: {args.upload_megabytes} MiB through the web process vs a sink")
        upload_env = {**extra, "ATRIUM_BENCH_ENDPOINTS": "1"}
        upload_server = BenchAtrium(var_dir=work / "upload-var", extra_env=upload_env).setup()
        try:
            upload_seed = seed(upload_server, members=1, threads=1, servers={})
            upload_server.start()
            results["upload"] = upload.run(
                upload_server, upload_seed, work=work, megabytes=args.upload_megabytes
            )
        finally:
            upload_server.stop()
            upload_server.drop_database()
    if "fleet" in args.only and production:
        _log(f"fleet: {args.fleet_clients} clients through nginx over 3 web processes")
        results["fleet"] = fleet.run(
            clients=args.fleet_clients,
            threads=args.fleet_threads,
            per_client=args.per_client,
            web_processes=args.fleet_web_processes,
        )
    results["machine"]["loadavg_end"] = os.getloadavg()
    results["budgets"] = budgets.rows(results)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return results


def _py_spy(server: BenchAtrium, out: str | None) -> subprocess.Popen | None:
    """`py-spy record` of the web process (all threads, idle frames left out) while the
    first server's benchmarks run; the bench extra installs it (`pip install -e .[bench]`)."""
    if not out:
        return None
    exe = Path(sys.executable).with_name("py-spy")
    if not exe.exists():
        raise SystemExit("--py-spy needs py-spy: pip install -c constraints.txt -e '.[bench]'")
    assert server.web is not None
    fmt = "speedscope" if out.endswith(".json") else "raw" if out.endswith(".txt") else "flamegraph"
    _log(f"py-spy recording the web process ({server.web.pid}) into {out}")
    return subprocess.Popen(
        [str(exe), "record", "--pid", str(server.web.pid), "--rate", "250", "--nonblocking"]
        + ["--threads", "--format", fmt, "--output", out],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def write(results: dict[str, Any], profile: str) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    text = json.dumps(results, indent=1, sort_keys=True, default=str)
    path = RESULTS / f"{stamp}-{profile}.json"
    path.write_text(text + "\n")
    (RESULTS / f"latest-{profile}.json").write_text(text + "\n")
    return path


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--profile", choices=["embedded", "production"], default="embedded")
    p.add_argument("--calls", type=int, default=1000, help="round-trip calls (each side)")
    p.add_argument("--rounds", type=int, default=100, help="fan-out results")
    p.add_argument("--clients", type=int, default=200)
    p.add_argument("--threads", type=int, default=10, help="threads the clients spread over")
    p.add_argument("--per-client", type=int, default=5, help="ui calls per client")
    p.add_argument("--start-rate", type=float, default=40, help="throughput: first calls/s")
    p.add_argument("--rate-factor", type=float, default=1.1, help="throughput: rate step")
    p.add_argument("--step-seconds", type=float, default=5, help="throughput: seconds a step")
    p.add_argument("--max-rate", type=float, default=600, help="throughput: highest calls/s")
    p.add_argument("--generator-processes", type=int, default=2, help="throughput: client procs")
    p.add_argument("--fleet-clients", type=int, default=600, help="fleet: clients via nginx")
    p.add_argument("--fleet-web-processes", type=int, default=3, help="fleet: web processes")
    p.add_argument("--fleet-threads", type=int, default=30, help="fleet: threads they spread over")
    p.add_argument("--megabytes", type=int, default=50)
    p.add_argument("--upload-megabytes", type=int, default=200, help="upload: MiB")
    p.add_argument("--worker-calls", type=int, default=60, help="worker_events: media results")
    p.add_argument("--view-samples", type=int, default=15, help="viewmount: measured views")
    p.add_argument("--redis-db", type=int, default=13, help="production: layer db (+1 broker)")
    p.add_argument(
        "--only",
        nargs="*",
        default=[
            "roundtrip",
            "fanout",
            "concurrency",
            "throughput",
            "worker_events",
            "media",
            "render",
            "viewmount",
            "upload",
            "fleet",
        ],
    )
    p.add_argument(
        "--py-spy",
        metavar="FILE",
        help="profile the web process with py-spy (.txt: collapsed stacks, .json: speedscope, "
        "else an SVG flame graph)",
    )
    p.add_argument("--keep", action="store_true", help="keep the work folder (logs)")
    p.add_argument("--no-write", action="store_true")
    p.add_argument("--json-out", metavar="FILE", help="also write the results to FILE")
    return p


def main() -> None:
    args = parser().parse_args()
    results = run(args)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(results, indent=1, default=str) + "\n")
    if not args.no_write:
        path = write(results, args.profile)
        _log(f"wrote {path.relative_to(RESULTS.parent.parent)}")
    for line in budgets.table(args.profile, results):
        print(line, flush=True)
    print("BENCH-RESULT=" + json.dumps({"profile": args.profile, "rows": results["budgets"]}))


if __name__ == "__main__":
    main()
