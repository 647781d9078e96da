"""The report: a line per result as it comes in, the table with Quiver's ratios to each peer,
and the final JSON line of every figure (null where a system was skipped or a scenario
failed).

``FIGURES`` is the one list of figures: each row of the table and each key of the JSON
line (``<system>_<key>``) comes from it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .workload import BODY_BYTES, SCENARIOS, SCENARIOS_OF, SYSTEMS

if TYPE_CHECKING:
    from .runner import Run


def print_descriptions(result: Run) -> None:
    print("durability and versions:")
    for system in result.systems:
        info = result.info[system]
        if "skipped" in info:
            print(f"  {system:9} SKIPPED: {info['skipped']}")
        elif "failed" in info:
            print(f"  {system:9} FAILED to describe: {info['failed'][-300:]}")
        else:
            print(f"  {system:9} {info['server']}; {info['client']}")
            print(f"  {'':9} durability: {info['durability']}")


def progress(scenario: str, system: str, r: dict[str, Any]) -> str:
    """One line as each result comes in."""
    head = f"{scenario:8} {system:9}"
    if "failed" in r or "skipped" in r:
        what = "FAILED" if "failed" in r else "SKIPPED"
        return f"{head} {what}: {(r.get('failed') or r.get('skipped') or '')[-400:]}"
    if scenario == "latency":
        line = (
            f"{head} p50 {r['p50_ms']:.2f} ms  p99 {r['p99_ms']:.2f} ms  max {r['max_ms'] or 0:.1f} ms  "
            f"(send acks p50 {r['send_p50_ms']:.2f} p99 {r['send_p99_ms']:.2f} ms)  "
            f"received {r['received']:,} of {r['sent']:,} sent (planned {r['planned']:,}, "
            f"sent at {r['achieved_rate']:,}/s)"
        )
        if r["send_errors"]:
            line += f"  [{r['send_errors']} send errors: {r['first_error']}]"
        return line
    line = f"{head} {r['msgs_per_s']:>9,} msgs/s"
    if "group_commit" in r:
        commit = r["group_commit"]
        line += f"  ({commit['syncs_per_s']:,} disk syncs/s, {commit['sends_per_sync']} sends per sync)"
    if scenario == "batch" and "modes" in r:
        modes = r["modes"]
        line += "  (" + ", ".join(f"{m} {v['msgs_per_s']:,}/s" for m, v in modes.items()) + ")"
    if scenario == "catchup":
        line += (
            f"  {r['messages']:,} msgs in {r['elapsed_s']:.2f} s, preload {r.get('preload_msgs_s', 0):,}/s"
        )
        if "shutdown_s" in r:
            line += f", of which shutdown/commit {r['shutdown_s']:.2f} s, committed {r['committed']:,}"
        if "unacked" in r:
            line += f", unacked after {r['unacked']}"
        if not r["complete"]:
            line += "  [INCOMPLETE]"
        pull = r.get("pull")
        if pull:
            line += (
                f"\n{'':18} PullConsumer {pull['msgs_per_s']:>9,} msgs/s  {pull['messages']:,} msgs "
                f"in {pull['elapsed_s']:.2f} s, committed {pull['committed']:,}"
            )
    errors = r.get("errors") or sum(v.get("errors", 0) for v in r.get("modes", {}).values())
    if errors:
        first = r.get("first_error") or next(v["first_error"] for v in r["modes"].values() if v["errors"])
        line += f"  [{errors} errors: {first}]"
    return line


FIGURES: list[tuple[str, str, str, Callable[[dict[str, Any]], Any], bool]] = [
    ("sync_msgs_s", "a. sync send, msgs/s", "sync", lambda r: r["msgs_per_s"], False),
    ("sync8_msgs_s", "   sync sends from 8 senders, msgs/s", "sync8", lambda r: r["msgs_per_s"], False),
    ("batch_msgs_s", "b. pipelined/batched send, msgs/s", "batch", lambda r: r["msgs_per_s"], False),
    (
        "batch_send_batch32_msgs_s",
        "   quiver send_batch(32)",
        "batch",
        lambda r: r["modes"]["send_batch32"]["msgs_per_s"],
        False,
    ),
    (
        "batch_send_async256_msgs_s",
        "   quiver send_async(256 out)",
        "batch",
        lambda r: r["modes"]["send_async256"]["msgs_per_s"],
        False,
    ),
    (
        "batch_send_batch_async32x8_msgs_s",
        "   quiver send_batch_async(32, 8 out)",
        "batch",
        lambda r: r["modes"]["send_batch_async32x8"]["msgs_per_s"],
        False,
    ),
    ("catchup_msgs_s", "c. consumer catch-up, msgs/s", "catchup", lambda r: r["msgs_per_s"], False),
    ("catchup_pull_msgs_s", "   quiver PullConsumer", "catchup", lambda r: r["pull"]["msgs_per_s"], False),
    ("latency_p50_ms", "d. latency p50, ms", "latency", lambda r: r["p50_ms"], True),
    ("latency_p99_ms", "   latency p99, ms", "latency", lambda r: r["p99_ms"], True),
    ("latency_max_ms", "   latency max, ms", "latency", lambda r: r["max_ms"], True),
    ("latency_send_p50_ms", "   its sends' ack, p50 ms", "latency", lambda r: r["send_p50_ms"], True),
    ("latency_send_p99_ms", "   its sends' ack, p99 ms", "latency", lambda r: r["send_p99_ms"], True),
    ("latency_received", "   received", "latency", lambda r: r["received"], False),
    ("latency_sent", "   sent", "latency", lambda r: r["sent"], False),
    ("latency_send_rate", "   achieved send rate, msgs/s", "latency", lambda r: r["achieved_rate"], False),
]


NO_RATIO = {"latency_received", "latency_sent", "latency_send_rate"}


def figures(result: Run) -> dict[str, dict[str, Any]]:
    """figure key -> system -> value (None: skipped, failed or not run)."""
    out: dict[str, dict[str, Any]] = {}
    for key, _label, scenario, read, _lower in FIGURES:
        row: dict[str, Any] = {}
        for system in SYSTEMS:
            r = result.results.get(scenario, {}).get(system)
            try:
                row[system] = None if r is None or "failed" in r or "skipped" in r else read(r)
            except (KeyError, TypeError):
                row[system] = None  # a figure this system does not have (quiver's sub-rows)
        out[key] = row
    return out


def fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and value < 100:
        return f"{value:.2f}"
    return f"{value:,.0f}"


def print_table(result: Run, table: dict[str, dict[str, Any]]) -> None:
    systems = result.systems
    peers = [p for p in systems if p != "quiver"]
    ratio_heads = [f"quiver/{p}" for p in peers] if "quiver" in systems else []
    widths = [36] + [10] * len(systems) + [max(12, len(h)) for h in ratio_heads]
    head = ["figure (1 KiB messages)", *systems, *ratio_heads]
    print()
    print("  ".join(h.ljust(widths[0]) if i == 0 else h.rjust(widths[i]) for i, h in enumerate(head)))
    for key, label, scenario, _read, lower in FIGURES:
        if scenario not in result.scenarios:
            continue
        row = table[key]
        if all(row[s] is None for s in systems):
            continue
        cells = [label + (" (lower is better)" if lower and label.startswith("d.") else "")]
        cells += [fmt(row[s]) for s in systems]
        for peer in peers if ratio_heads else []:
            q, p = row["quiver"], row[peer]
            cells.append(f"{q / p:.2f}x" if key not in NO_RATIO and q is not None and p else "")
        print("  ".join(c.ljust(widths[0]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(cells)))
    skipped = {s: result.info[s]["skipped"] for s in systems if "skipped" in result.info[s]}
    for system, why in skipped.items():
        print(f"{system}: skipped ({why})")


def summary_json(result: Run, table: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Every figure of every system (null where skipped, failed or not run), one object."""
    out: dict[str, Any] = {
        "bench": "peers",
        "body_bytes": BODY_BYTES,
        "catchup_messages": result.settings.count,
        "latency_rate": result.settings.latency_rate,
        "quick": result.quick,
        "quiver_flush": result.flush,
    }
    for system in SYSTEMS:
        info = result.info.get(system, {})
        for key, _label, scenario, _read, _lower in FIGURES:
            if scenario not in SCENARIOS_OF.get(system, SCENARIOS):
                continue
            if system != "quiver" and key.startswith("batch_send_"):
                continue
            if system != "quiver" and key == "catchup_pull_msgs_s":
                continue
            out[f"{system}_{key}"] = table[key].get(system)
        out[f"{system}_skipped"] = info.get("skipped") or (None if info else "not selected")
        out[f"{system}_durability"] = info.get("durability")
    for system in SYSTEMS:
        if system == "quiver":
            continue
        for key in (
            "sync_msgs_s",
            "sync8_msgs_s",
            "batch_msgs_s",
            "catchup_msgs_s",
            "latency_p50_ms",
            "latency_p99_ms",
        ):
            if key.split("_")[0] not in SCENARIOS_OF.get(system, SCENARIOS):
                continue
            q, p = table[key]["quiver"], table[key][system]
            out[f"ratio_quiver_{system}_{key}"] = round(q / p, 3) if q is not None and p else None
    for key, peer, most, bound in TARGETS:
        ratio = out.get(f"ratio_quiver_{peer}_{key}")
        met = None if ratio is None else (ratio <= bound if most else ratio >= bound)
        if (key, peer) in SYNC_FLUSH_TARGETS and result.flush != "SYNC_FLUSH":
            met = None  # an unsynced broker against fsync'd confirms proves nothing
        out[f"target_quiver_{peer}_{key}_{'at_most' if most else 'at_least'}_{bound}"] = met
    return out


TARGETS = (
    ("sync_msgs_s", "redis", False, 1.1),
    ("sync_msgs_s", "nats", False, 1.3),
    ("sync_msgs_s", "echo", False, 0.8),
    ("latency_p50_ms", "redis", True, 1.0),
    ("latency_p99_ms", "redis", True, 1.5),
    ("sync8_msgs_s", "rabbitmq", False, 3.0),  # the SYNC_FLUSH target (--quiver-flush SYNC_FLUSH)
)
"""Issue 19's targets as ratios of Quiver's figure to a peer's in the same run: (figure, peer,
whether the ratio is a most rather than a least, the bound)."""
SYNC_FLUSH_TARGETS = {("sync8_msgs_s", "rabbitmq")}
"""Targets judged only in a ``--quiver-flush SYNC_FLUSH`` run (null in any other)."""
