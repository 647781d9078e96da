"""The report: one line per phase as it finishes, the targets, and the final JSON line.

The printed lines compare each figure with its ceiling (the echo server, the store
alone, the official client); ``summary_json`` flattens a run's figures into the one JSON
object that ends the output (its keys are what BENCHMARKS.md records run after run).
"""

from __future__ import annotations

from typing import Any

from .frames import BODY_BYTES


def fmt_ingest(label: str, broker: dict[str, Any], echo: dict[str, Any] | None, ceiling: float | None) -> str:
    if "failed" in broker:
        return f"{label}: FAILED {broker['failed']}"
    line = (
        f"{label}: {broker['msgs_per_s']:>9,} msgs/s  latency p50 {broker['p50_ms']:.2f} ms "
        f"p99 {broker['p99_ms']:.2f} ms"
    )
    if echo and "failed" not in echo and echo["msgs_per_s"]:
        line += f"  | echo {echo['msgs_per_s']:,}/s ({broker['msgs_per_s'] / echo['msgs_per_s']:.0%})"
    if ceiling:
        line += f"  | store alone {ceiling:,.0f}/s ({broker['msgs_per_s'] / ceiling:.0%})"
    for name, r in (("", broker), ("echo: ", echo or {})):
        if r.get("errors") or r.get("warmup_errors"):
            line += (
                f"  [{name}{r['errors']} errors, {r.get('warmup_errors', 0)} during warm-up: "
                f"{r['first_error'][:70]}]"
            )
    return line


def vs(ours: dict[str, Any], other: dict[str, Any] | None, name: str, who: str = "ours ") -> str:
    """`` | name N/s (ours P%)`` when both figures exist."""
    if not other or "failed" in other or not other.get("msgs_per_s") or "failed" in ours:
        return ""
    return f"  | {name} {other['msgs_per_s']:,}/s ({who}{ours['msgs_per_s'] / other['msgs_per_s']:.0%})"


def print_client_catchup(figures: dict[str, Any]) -> None:
    raw = figures.get("catchup", {}).get("broker")
    official = figures.get("official_push")
    labels = {
        "ours_push": "our PushConsumer catch-up      ",
        "ours_pull": "our PullConsumer catch-up      ",
        "official_push": "official PushConsumer catch-up ",
    }
    for phase, label in labels.items():
        r = figures.get(phase)
        if r is None:
            continue
        if "failed" in r:
            print(f"{label}: FAILED {r['failed']}")
            continue
        line = f"{label} ({r['messages']:,} msgs): {r['msgs_per_s']:>9,} msgs/s"
        if phase != "official_push":
            line += vs(r, official, "official push")
        line += vs(r, raw, "raw pulls", "" if phase == "official_push" else "ours ")
        if not r["complete"]:
            line += f"  [INCOMPLETE: {r['messages']} of {r['expected']}]"
        if r.get("errors"):
            line += f"  [{r['errors']} errors: {r['first_error'][:70]}]"
        print(line)


def catchup_line(broker_r: dict[str, Any], echo_r: dict[str, Any]) -> str:
    """The raw pulls' catch-up beside the echo's."""
    if "failed" in broker_r:
        return f"consume catch-up: FAILED {broker_r['failed']}"
    line = (
        f"consume catch-up ({broker_r['messages']:,} msgs, 32 per pull): {broker_r['msgs_per_s']:>9,} msgs/s"
    )
    if "failed" not in echo_r and echo_r["msgs_per_s"]:
        line += f"  | echo {echo_r['msgs_per_s']:,}/s ({broker_r['msgs_per_s'] / echo_r['msgs_per_s']:.0%})"
    if not broker_r["complete"]:
        line += f"  [INCOMPLETE: {broker_r['messages']} of {broker_r['expected']}]"
    return line


def e2e_line(rate: int, r: dict[str, Any]) -> str:
    """The paced sends' latencies: send, send-to-receive, store-to-receive."""
    if "failed" in r:
        return f"end-to-end at {rate:,} msgs/s: FAILED {r['failed']}"
    send = r["send"]
    return (
        f"at {rate:,} msgs/s paced: send latency p50 {send['p50_ms']:.2f} ms "
        f"p99 {send['p99_ms']:.2f} ms "
        f"(max {send['max_ms']:.1f}); send-to-receive p50 {r['e2e_p50_ms']:.2f} ms "
        f"p99 {r['e2e_p99_ms']:.2f} ms; store-to-receive p50 {r['store_to_receive_p50_ms']:.0f} ms "
        f"p99 {r['store_to_receive_p99_ms']:.0f} ms; received {r['received']:,} of {r['sent']:,}"
    )


# Sending loads measured against the broker and the echo: phase, its JSON key, the echo's key.
INGEST_KEYS = (
    ("one_at_a_time", "raw_one_at_a_time", "echo_one_at_a_time"),
    ("raw_single", "raw_single", "echo_single"),
    ("raw_batch", "raw_batch32", "echo_batch32"),
    ("official_single", "official_single", "echo_official_single"),
    ("official_batch", "official_batch32", "echo_official_batch32"),
)
OURS_KEYS = (
    ("ours_sync1", "ours_sync1", "echo_ours_sync1"),
    ("ours_sync", "ours_sync", "echo_ours_sync"),
    ("ours_async", "ours_async", "echo_ours_async"),
    ("ours_batch", "ours_batch32", "echo_ours_batch32"),
)


def put_load(out: dict[str, Any], pair: dict[str, Any], key: str, echo_key: str) -> None:
    """A sending load's broker figures under ``key``; the echo's msgs/s when it ran."""
    b, e = pair["broker"], pair["echo"]
    out[f"{key}_msgs_s"] = b["msgs_per_s"]
    out[f"{key}_p50_ms"] = b["p50_ms"]
    out[f"{key}_p99_ms"] = b["p99_ms"]
    out[f"{key}_errors"] = b["errors"]
    if "failed" not in e:
        out[f"{echo_key}_msgs_s"] = e["msgs_per_s"]


def summary_json(result: dict[str, Any]) -> dict[str, Any]:
    """The one-line JSON of a run's figures."""
    f = result["figures"]
    out: dict[str, Any] = {"bench": "broker", "body_bytes": BODY_BYTES, "flush": "ASYNC_FLUSH"}
    ceiling = result["ceiling"]
    if ceiling:
        out["store_single_msgs_s"] = round(ceiling["single"])
        out["store_batch32_msgs_s"] = round(ceiling["batch"])
    for phase, key, echo_key in INGEST_KEYS:
        if phase in f and "failed" not in f[phase]["broker"]:
            put_load(out, f[phase], key, echo_key)
    if "catchup" in f and "failed" not in f["catchup"]["broker"]:
        out["catchup_msgs_s"] = f["catchup"]["broker"]["msgs_per_s"]
        out["catchup_messages"] = f["catchup"]["broker"]["messages"]
        if "failed" not in f["catchup"]["echo"]:
            out["echo_catchup_msgs_s"] = f["catchup"]["echo"]["msgs_per_s"]
    for phase, key, echo_key in OURS_KEYS:
        if phase in f and "failed" not in f[phase]["broker"]:
            put_load(out, f[phase], key, echo_key)
            official = f[phase].get("official")
            if official and "failed" not in official:
                out["official_sync1_msgs_s"] = official["msgs_per_s"]
    for phase in ("ours_push", "ours_pull", "official_push"):
        if phase in f and "failed" not in f[phase]:
            out[f"{phase}_msgs_s"] = f[phase]["msgs_per_s"]
            out[f"{phase}_messages"] = f[phase]["messages"]
    if "e2e" in f and "failed" not in f["e2e"]:
        r = f["e2e"]
        out["fixed_rate_msgs_s"] = r["rate"]
        out["fixed_rate_send_p50_ms"] = r["send"]["p50_ms"]
        out["fixed_rate_send_p99_ms"] = r["send"]["p99_ms"]
        out["e2e_p50_ms"] = r["e2e_p50_ms"]
        out["e2e_p99_ms"] = r["e2e_p99_ms"]
        out["store_to_receive_p99_ms"] = r["store_to_receive_p99_ms"]
    return out


def targets(out: dict[str, Any]) -> list[str]:
    """The issue's targets, each met, not met or not measured in this run."""
    checks = [
        ("single sends >= 20,000 msgs/s (raw frames)", "raw_single_msgs_s", lambda v: v >= 20_000),
        ("batches of 32 >= 100,000 msgs/s (raw frames)", "raw_batch32_msgs_s", lambda v: v >= 100_000),
        ("p99 send latency < 5 ms at 5,000 msgs/s", "fixed_rate_send_p99_ms", lambda v: 0 < v < 5),
    ]
    lines = []
    for name, key, ok in checks:
        verdict = "not measured" if key not in out else "met" if ok(out[key]) else "NOT met"
        lines.append(f"target: {name}: {verdict}")
    return lines
