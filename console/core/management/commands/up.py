"""Start the Quiver platform's processes and keep them running until interrupted."""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from console.core import redisserver
from console.core.processes import Ports, broker_conf_warnings, platform_children
from console.core.supervisor import Supervisor
from console.quiver import platform_settings


class Command(BaseCommand):
    help = "Migrate, create the first admin, then start and supervise the platform's processes."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--no-console", action="store_true", help="do not start the console web server")
        parser.add_argument("--data-dir", type=Path, help="where the database, stores and logs live")

    def handle(self, *args: Any, no_console: bool, data_dir: Path | None, **options: Any) -> None:
        quiver_data_dir: Path = platform_settings()["DATA_DIR"]
        if data_dir is not None and data_dir.expanduser().resolve() != quiver_data_dir:
            self.restart_with_data_dir(data_dir.expanduser().resolve())
        self.stdout.write(f"data dir: {quiver_data_dir}")
        try:
            redis = redisserver.choose(quiver_data_dir, os.environ)
        except (redisserver.RedisUnavailable, ValueError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"redis: {redisserver.masked(redis.url)} ({redis.source})")
        call_command("migrate", interactive=False, verbosity=0)
        self.stdout.write("database: migrated")
        # Static files with their gzip copies, for WhiteNoise (see settings.STATIC_ROOT).
        call_command("collectstatic", interactive=False, verbosity=0)
        self.stdout.write("static files: collected")
        self.ensure_admin()
        quiver = platform_settings()
        ports = Ports(
            quiver["NAMESRV_PORT"], quiver["BROKER_PORT"], quiver["CONSOLE_PORT"], quiver["PROXY_PORT"]
        )
        children = platform_children(
            quiver_data_dir,
            ports,
            redis.url,
            redis_child=redis.child,
            console=not no_console,
            namesrv_addr=quiver["NAMESRV_ADDR"],
            long_nice=quiver["LONG_WORK_NICE"],
        )
        for warning in broker_conf_warnings(quiver_data_dir / "broker.conf"):
            self.stderr.write(warning)
        console_url = f"http://127.0.0.1:{ports.console}/"
        summary = [
            f"console:     {console_url}" + ("" if not no_console else " (not started: --no-console)"),
            f"REST API:    {console_url}api/  (maintenance jobs: {console_url}api/maintenance/jobs/)",
            f"nameserver:  127.0.0.1:{ports.namesrv}    broker: 127.0.0.1:{ports.broker}"
            f"    proxy (RocketMQ 5 clients, gRPC): 127.0.0.1:{ports.proxy}",
            f"redis:       {redisserver.masked(redis.url)}",
            f"logs:        {quiver_data_dir / 'log'}",
        ]
        supervisor = Supervisor(
            children, quiver_data_dir / "log", out=self.stdout, summary_lines=lambda: summary
        )
        sys.exit(supervisor.run())

    def ensure_admin(self) -> None:
        """Create the superuser ``admin`` on first run, printing its random password once."""
        users = get_user_model()
        if users.objects.filter(username="admin").exists():
            return
        password = secrets.token_urlsafe(12)
        users.objects.create_superuser("admin", email="", password=password)
        self.stdout.write(
            self.style.WARNING(
                f"created superuser 'admin' with password {password} "
                "(shown only now; change it with: python3 manage.py changepassword admin)"
            )
        )

    def restart_with_data_dir(self, data_dir: Path) -> None:
        """Re-execute this command with QUIVER_DATA_DIR set, so settings and children all use it."""
        os.environ["QUIVER_DATA_DIR"] = str(data_dir)
        os.execv(sys.executable, [sys.executable, *sys.argv])
