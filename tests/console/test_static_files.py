"""Static files are served compressed and with cache headers (issue 15): WhiteNoise over what
``up``'s collectstatic writes, through the console's own middleware stack."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management import call_command
from django.test import Client


def test_collected_static_files_are_served_gzipped_with_cache_headers(tmp_path: Path, settings: Any) -> None:
    settings.STATIC_ROOT = tmp_path / "static"
    call_command("collectstatic", interactive=False, verbosity=0)
    assert (tmp_path / "static" / "vendor" / "echarts" / "echarts.min.js.gz").is_file()
    settings.WHITENOISE_USE_FINDERS = False  # as up's console, which starts after collectstatic
    client = Client()
    plain = client.get("/static/vendor/echarts/echarts.min.js")
    zipped = client.get("/static/vendor/echarts/echarts.min.js", HTTP_ACCEPT_ENCODING="gzip")
    assert plain.status_code == zipped.status_code == 200
    assert zipped["Content-Encoding"] == "gzip"
    plain_size = int(plain["Content-Length"])
    assert int(zipped["Content-Length"]) * 3 < plain_size, "the chart library is sent at a third or less"
    assert "max-age=3600" in zipped["Cache-Control"] and zipped.has_header("Last-Modified")
    again = client.get(
        "/static/vendor/echarts/echarts.min.js", HTTP_IF_MODIFIED_SINCE=zipped["Last-Modified"]
    )
    assert again.status_code == 304


def test_without_collectstatic_the_project_files_are_served(settings: Any) -> None:
    settings.WHITENOISE_USE_FINDERS = True
    response = Client().get("/static/console/console.css")
    assert response.status_code == 200 and b".badge" in b"".join(response.streaming_content)  # type: ignore[attr-defined]


def test_pages_are_sent_gzipped_to_a_browser_that_accepts_it() -> None:
    """The HTML itself is compressed too (a DLQ page of 100 rows is ~40 kB raw)."""
    import gzip

    client = Client()
    plain = client.get("/login/")
    zipped = client.get("/login/", HTTP_ACCEPT_ENCODING="gzip")
    assert plain.status_code == zipped.status_code == 200
    assert not plain.has_header("Content-Encoding") and zipped["Content-Encoding"] == "gzip"
    assert (
        b"Sign in" in gzip.decompress(zipped.content) or b"sign in" in gzip.decompress(zipped.content).lower()
    )
