"""The DESIGN §9 budgets, evaluated on one profile's results."""

from __future__ import annotations

from typing import Any

# DESIGN §9 (issue 28): the added time by profile, and the web process's CPU per call.
RT_P50_ADDED_MS = {"embedded": 3.0, "production": 4.0}
RT_P99_ADDED_MS = {"embedded": 10.0, "production": 15.0}
RT_CPU_MS = 4.0
CONCURRENCY_MIN_CALLS_PER_S = {"production": 150.0}  # one web process, 200 clients
THROUGHPUT_MIN_CALLS_PER_S = {"production": 150.0}  # the saturation point (p99 < 100 ms)
FANOUT_P99_MS = 50.0
MEDIA_PLACEHOLDER_MS = 200.0
MEDIA_RSS_GROWTH_MIB = 16.0  # web server: the base64 text streams to a spool file
MEDIA_WORKER_RATIO = 1.0  # the worker: one decoded copy at most
UPLOAD_RSS_GROWTH_MIB = 16.0  # a member's upload streams to staging (issue 26)
UPLOAD_MIN_RATIO = 0.8  # of a plain upload of the same file to a sink, same server
RENDER_MS = 150.0
VIEWMOUNT_P50_MS = 350.0  # DESIGN §9 (issue 27: unchanged or better)
WORKER_EVENTS_P99_MS = 250.0


def rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    profile = results.get("profile", "embedded")
    rt = results.get("roundtrip")
    if rt:
        h, d = rt["host_ms"], rt["direct_ms"]
        p50_budget, p99_budget = RT_P50_ADDED_MS[profile], RT_P99_ADDED_MS[profile]
        out.append(
            _row(
                "ui tools/call p50",
                f"{h['p50']:.2f} ms",
                f"{d['p50']:.2f} ms",
                f"+{rt['added_p50_ms']:.2f} ms (x{rt['ratio_p50']:.1f}), "
                f"cpu {rt.get('host_cpu_ms_per_call', 0):.1f} ms/call",
                f"+<= {p50_budget:g} ms",
                rt["added_p50_ms"] <= p50_budget and rt["errors"] == 0,
            )
        )
        out.append(
            _row(
                "ui tools/call p99",
                f"{h['p99']:.2f} ms",
                f"{d['p99']:.2f} ms",
                f"+{rt['added_p99_ms']:.2f} ms (x{rt['ratio_p99']:.1f})",
                f"+<= {p99_budget:g} ms",
                rt["added_p99_ms"] <= p99_budget and rt["errors"] == 0,
            )
        )
        cpu = rt.get("host_cpu_ms_per_call", float("inf"))
        counted = rt.get("per_call") or {}
        out.append(
            _row(
                "ui tools/call web cpu",
                f"{cpu:.2f} ms/call",
                f"loop {rt['host_cpu_ms_per_call_by_thread']['loop']:.1f} ms",
                f"{counted.get('db_statements', 0):.0f} statements, "
                f"{counted.get('redis_commands', 0):.0f} redis cmds, "
                f"pg cpu {counted.get('pg_backend_cpu_ms', 0):.1f} ms",
                f"<= {RT_CPU_MS:g} ms",
                cpu <= RT_CPU_MS and rt["errors"] == 0,
            )
        )
    fo = results.get("fanout")
    if fo:
        delivery = fo.get("delivery_ms") or {}
        p99 = delivery.get("p99", float("inf"))
        out.append(
            _row(
                f"fan-out to {fo['members']} p99",
                f"{p99:.2f} ms",
                f"p50 {delivery.get('p50', float('nan')):.2f} ms",
                f"{fo['rounds']} results x {fo['members']}",
                f"< {FANOUT_P99_MS:g} ms",
                p99 < FANOUT_P99_MS and fo["errors"] == 0 and fo["incomplete_rounds"] == 0,
            )
        )
    cc = results.get("concurrency")
    if cc:
        least = CONCURRENCY_MIN_CALLS_PER_S.get(profile, 0.0)
        out.append(
            _row(
                f"{cc['clients']} clients ui calls",
                f"{cc['calls_per_s']:.0f} calls/s",
                f"{cc['calls']} calls",
                f"err {cc['errors']} lost {cc['lost_events']} gaps {cc['seq_gaps']} "
                f"finals-missing {cc['missing_final_events']}",
                f"0 errors, 0 lost, >= {least:g}/s" if least else "0 errors, 0 lost",
                cc["calls_per_s"] >= least
                and cc["errors"] == 0
                and cc["lost_events"] == 0
                and cc["seq_gaps"] == 0
                and cc["missing_final_events"] == 0,
            )
        )
    tp = results.get("throughput")
    if tp:
        least = THROUGHPUT_MIN_CALLS_PER_S.get(profile, 0.0)
        last = tp["steps"][-1] if tp["steps"] else {}
        out.append(
            _row(
                f"saturation, {tp['clients']} clients",
                f"{tp['saturation_calls_per_s']:.0f} calls/s",
                f"next step {last.get('rate', 0):.0f}/s",
                f"p99 < {tp['p99_limit_ms']:g} ms; err {tp['errors']} lost {tp['lost_events']} "
                f"gaps {tp['seq_gaps']}",
                f">= {least:g} calls/s" if least else "measured",
                tp["saturation_calls_per_s"] >= least
                and tp["lost_events"] == 0
                and tp["seq_gaps"] == 0
                and tp["missing_final_events"] == 0,
            )
        )
    we = results.get("worker_events")
    if we:
        delivery = we.get("delivery_ms") or {}
        p99 = delivery.get("p99", float("inf"))
        out.append(
            _row(
                "worker event live p99",
                f"{p99:.1f} ms",
                f"p50 {delivery.get('p50', float('nan')):.1f} ms",
                f"{we['worker_events']} events, missing {we['missing_events']} "
                f"dup {we['duplicate_frames']}",
                f"< {WORKER_EVENTS_P99_MS:g} ms",
                p99 < WORKER_EVENTS_P99_MS
                and we["errors"] == 0
                and we["missing_events"] == 0
                and we["duplicate_frames"] == 0
                and we["worker_events"] > 0,
            )
        )
    fl = results.get("fleet")
    if fl:
        spread = "/".join(str(n) for n in fl["sockets_per_web_process"].values())
        out.append(
            _row(
                f"fleet {fl['clients']} clients via nginx",
                f"{fl['calls_per_s']:.0f} calls/s",
                f"{fl['calls']} calls, sockets {spread}",
                f"err {fl['errors']} lost {fl['lost_events']} dup {fl['duplicate_events']} "
                f"late {fl['out_of_order_arrivals']} finals-missing {fl['missing_final_events']}",
                "0 errors, 0 lost, 0 dup",
                fl["errors"] == 0
                and fl["lost_events"] == 0
                and fl["duplicate_events"] == 0
                and fl["missing_final_events"] == 0
                and len(fl["sockets_per_web_process"]) == fl["web_processes"],
            )
        )
    up = results.get("upload")
    if up:
        out.append(
            _row(
                f"{up['megabytes']} MiB upload web server peak RSS",
                f"+{up['rss_growth_mib']:.1f} MiB",
                f"file {up['megabytes']} MiB",
                "streamed to staging",
                f"<= {UPLOAD_RSS_GROWTH_MIB:g} MiB",
                up["rss_growth_mib"] <= UPLOAD_RSS_GROWTH_MIB,
            )
        )
        out.append(
            _row(
                f"{up['megabytes']} MiB upload throughput",
                f"{up['upload_mib_per_s']:.0f} MiB/s",
                f"plain upload {up['sink_mib_per_s']:.0f} MiB/s",
                f"x{up['throughput_ratio']:.2f} (discard {up.get('discard_mib_per_s', 0):.0f} MiB/s)",
                f">= {UPLOAD_MIN_RATIO:g}",
                up["throughput_ratio"] >= UPLOAD_MIN_RATIO,
            )
        )
    md = results.get("media")
    if md:
        out.append(
            _row(
                f"{md['megabytes']} MB media placeholder",
                f"{md['placeholder_ms']:.1f} ms",
                f"call {md['tool_call_s']:.2f} s",
                "staged" if md["placeholder"] else "NO PLACEHOLDER",
                f"< {MEDIA_PLACEHOLDER_MS:g} ms",
                md["placeholder"] and md["placeholder_ms"] < MEDIA_PLACEHOLDER_MS,
            )
        )
        out.append(
            _row(
                f"{md['megabytes']} MB media web server peak RSS",
                f"+{md['rss_growth_mib']:.1f} MiB",
                f"raw JSON {md['raw_json_mib']:.0f} MiB",
                f"x{md['rss_growth_mib'] / md['raw_json_mib']:.2f} of the raw text",
                f"<= {MEDIA_RSS_GROWTH_MIB:g} MiB",
                md["rss_growth_mib"] <= MEDIA_RSS_GROWTH_MIB,
            )
        )
        if md.get("worker_peak_growth_mib") is not None:
            out.append(
                _row(
                    f"{md['megabytes']} MB media worker peak RSS",
                    f"+{md['worker_peak_growth_mib']:.1f} MiB",
                    f"decoded {md['decoded_mib']:.0f} MiB",
                    f"x{md['worker_ratio']:.2f} of one decoded copy",
                    f"<= {md['decoded_mib']:.0f} MiB",
                    md["worker_ratio"] <= MEDIA_WORKER_RATIO,
                )
            )
    rd = results.get("render")
    if rd:
        out.append(
            _row(
                "render 500 msgs/100 views",
                f"{rd['render_ms']['p50']:.1f} ms",
                f"p90 {rd['render_ms']['p90']:.1f}, cold {rd.get('cold_render_ms', 0):.0f} ms",
                f"{rd['page_bytes'] // 1024} KiB, {rd['iframes_in_page']} iframes",
                f"< {RENDER_MS:g} ms, lazy",
                rd["render_ms"]["p50"] < RENDER_MS
                and rd["iframes_in_page"] == 0
                and not rd["view_html_in_page"]
                and rd["lazy_mount"],
            )
        )
    vm = results.get("viewmount")
    if vm:
        ready = vm["ready_ms"]
        out.append(
            _row(
                "viewmount /call→ready p50",
                f"{ready['p50']:.0f} ms",
                f"p90 {ready['p90']:.0f}, min {ready['min']:.0f} ms",
                f"{vm['samples']} basic-vanillajs views, Chromium",
                f"< {VIEWMOUNT_P50_MS:g} ms",
                ready["p50"] < VIEWMOUNT_P50_MS,
            )
        )
    return out


def _row(name, measured, floor, relation, budget, ok) -> dict[str, Any]:
    return {
        "name": name,
        "measured": measured,
        "floor": floor,
        "relation": relation,
        "budget": budget,
        "pass": bool(ok),
    }


def table(profile: str, results: dict[str, Any]) -> list[str]:
    lines = []
    for row in rows(results):
        lines.append(
            f"{profile:<10} {row['name']:<28} {row['measured']:>14}  floor {row['floor']:<26} "
            f"{row['relation']:<40} budget {row['budget']:<18} {'PASS' if row['pass'] else 'FAIL'}"
        )
    return lines
