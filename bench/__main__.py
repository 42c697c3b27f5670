"""`make bench`: every DESIGN §9 benchmark on the embedded profile, then the first three on
the production profile (PostgreSQL + Redis, via scripts/with-production-services.sh).

Each profile runs in its own process (`python -m bench.run --profile ...`), writes
`bench/results/<timestamp>-<profile>.json` and `latest-<profile>.json`; this prints one
table with a line per budget. Exit status 0 whatever the verdicts (a benchmark is a
measurement, not a gate); 1 if a profile could not run at all.

    python -m bench                      # both profiles
    python -m bench --profiles embedded  # one
    python -m bench -- --calls 300       # arguments after -- go to bench.run
    python -m bench worker_events        # one benchmark, both profiles
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCTION_VARS = ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "ATRIUM_PROFILE")
HEADER = (
    f"{'profile':<10} {'benchmark':<28} {'measured':>14}  {'floor (same run)':<32} "
    f"{'ratio / added':<40} {'budget':<25} verdict"
)


def _command(profile: str, extra: list[str]) -> tuple[list[str], dict[str, str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    command = [sys.executable, "-m", "bench.run", "--profile", profile, *extra]
    if profile == "embedded":
        for key in PRODUCTION_VARS:
            env.pop(key, None)
        return command, env
    if not env.get("DATABASE_URL"):
        command = ["bash", str(ROOT / "scripts" / "with-production-services.sh"), *command]
    return command, env


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", nargs="*", default=["embedded", "production"])
    parser.add_argument("benchmarks", nargs="*", help="only these (bench.run --only)")
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    args, extra = parser.parse_known_args(argv[:cut])
    extra += argv[cut + 1 :]
    if args.benchmarks:
        extra += ["--only", *args.benchmarks]
    lines: list[str] = []
    failed_to_run: list[str] = []
    started = time.monotonic()
    for profile in args.profiles:
        if profile == "production" and not (
            os.environ.get("DATABASE_URL") or shutil.which("pg_isready")
        ):
            lines.append(f"{profile:<10} skipped: no PostgreSQL/Redis on this machine")
            continue
        command, env = _command(profile, extra)
        print(f"== {profile} profile ==", flush=True)
        proc = subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
        rows = None
        for line in proc.stdout.splitlines():
            if line.startswith("BENCH-RESULT="):
                rows = json.loads(line.split("=", 1)[1])
            elif line.strip() and not line.startswith("Production profile:"):
                lines.append(line)
        if proc.returncode != 0 or rows is None:
            failed_to_run.append(profile)
            lines.append(f"{profile:<10} did not complete (exit {proc.returncode}); see above")
    print()
    print(HEADER)
    print("-" * len(HEADER))
    for line in lines:
        print(line)
    verdicts = [line for line in lines if line.rstrip().endswith(("PASS", "FAIL"))]
    passed = sum(1 for line in verdicts if line.rstrip().endswith("PASS"))
    print(
        f"\n{passed} of {len(verdicts)} budgets pass "
        f"({time.monotonic() - started:.0f} s; results in bench/results/)"
    )
    return 1 if failed_to_run else 0


if __name__ == "__main__":
    raise SystemExit(main())
