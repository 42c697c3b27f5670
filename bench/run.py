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
    try:
        threads = 2 + args.threads + 1
        seeded = seed(
            server,
            members=max(args.clients, fanout.MEMBERS),
            threads=threads,
            servers={"board": stdio_server(BOARD, BOARD_STATE_FILE=state)},
        )
        server.start()
        rt_thread, fo_thread = seeded.threads[0], seeded.threads[1]
        cc_threads = seeded.threads[2 : 2 + args.threads]
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
        if "render" in args.only and not production:
            _log("render: 500 messages, 100 views")
            results["render"] = render.run(server, _slice(seeded, [render_thread]))
    finally:
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
        )
    results["machine"]["loadavg_end"] = os.getloadavg()
    results["budgets"] = budgets.rows(results)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return results


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
    p.add_argument("--fleet-clients", type=int, default=600, help="fleet: clients via nginx")
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
            "worker_events",
            "media",
            "render",
            "viewmount",
            "upload",
            "fleet",
        ],
    )
    p.add_argument("--keep", action="store_true", help="keep the work folder (logs)")
    p.add_argument("--no-write", action="store_true")
    return p


def main() -> None:
    args = parser().parse_args()
    results = run(args)
    if not args.no_write:
        path = write(results, args.profile)
        _log(f"wrote {path.relative_to(RESULTS.parent.parent)}")
    for line in budgets.table(args.profile, results):
        print(line, flush=True)
    print("BENCH-RESULT=" + json.dumps({"profile": args.profile, "rows": results["budgets"]}))


if __name__ == "__main__":
    main()
