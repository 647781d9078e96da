"""Settings read the environment loudly: a bad value is an error, never a guess."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from console.settings import database_from_url, envbool, envint, envsecret, persistent_secret_key


def test_it_reads_booleans(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QUIVER_FLAG", "True")
    assert envbool("QUIVER_FLAG", False) is True
    monkeypatch.setenv("QUIVER_FLAG", "off")
    assert envbool("QUIVER_FLAG", True) is False
    monkeypatch.delenv("QUIVER_FLAG")
    assert envbool("QUIVER_FLAG", True) is True


def test_it_refuses_a_boolean_it_cannot_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QUIVER_FLAG", "maybe")
    with pytest.raises(ImproperlyConfigured, match="QUIVER_FLAG"):
        envbool("QUIVER_FLAG", False)


def test_it_refuses_bad_and_out_of_range_integers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QUIVER_PORT", "80a")
    with pytest.raises(ImproperlyConfigured, match="not an integer"):
        envint("QUIVER_PORT", 8000)
    monkeypatch.setenv("QUIVER_PORT", "70000")
    with pytest.raises(ImproperlyConfigured, match="outside"):
        envint("QUIVER_PORT", 8000, minimum=1, maximum=65535)
    monkeypatch.setenv("QUIVER_PORT", "8080")
    assert envint("QUIVER_PORT", 8000, minimum=1, maximum=65535) == 8080


def test_it_reads_secrets_from_files(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "key").write_text("s3cret\n")
    monkeypatch.setenv("QUIVER_KEY_FILE", str(tmp_path / "key"))
    assert envsecret("QUIVER_KEY") == "s3cret"
    monkeypatch.setenv("QUIVER_KEY_FILE", str(tmp_path / "missing"))
    with pytest.raises(ImproperlyConfigured, match="QUIVER_KEY_FILE"):
        envsecret("QUIVER_KEY")


def test_it_keeps_the_generated_secret_key(tmp_path: Path) -> None:
    key = persistent_secret_key(tmp_path / "data" / "secret_key")
    assert len(key) >= 50
    assert persistent_secret_key(tmp_path / "data" / "secret_key") == key
    assert [p.name for p in (tmp_path / "data").iterdir()] == ["secret_key"]


def test_it_parses_postgres_urls() -> None:
    db = database_from_url("postgres://quiver:p%40ss@db.example:6543/console?sslmode=require")
    assert db["ENGINE"] == "django.db.backends.postgresql"
    assert (db["NAME"], db["USER"], db["PASSWORD"], db["HOST"], db["PORT"]) == (
        "console",
        "quiver",
        "p@ss",
        "db.example",
        "6543",
    )
    assert db["OPTIONS"] == {"sslmode": "require"}
    socket_db = database_from_url("postgresql://%2Fvar%2Frun%2Fpostgresql/console")
    assert socket_db["HOST"] == "/var/run/postgresql"


def test_it_parses_sqlite_urls() -> None:
    assert database_from_url("sqlite:////srv/quiver/console.db")["NAME"] == "/srv/quiver/console.db"
    assert database_from_url("sqlite:///console.db")["NAME"] == "console.db"


def test_it_refuses_other_databases() -> None:
    with pytest.raises(ImproperlyConfigured, match="mysql"):
        database_from_url("mysql://root@localhost/quiver")
