"""Start the web server and a Celery worker per queue together (the embedded mode of ``make demo``):
one for the ``cpu`` queue (trackers, imports, curation jobs) and one for the ``gpu`` queue
(training, evaluation, SAM), so a long training never waits behind a tracker run or the reverse."""
from __future__ import annotations

import ipaddress
import os
import signal
import subprocess
import sys

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from common.dev_server import send_without_delay

DEMO_LOGINS = "manager / annotator1..3 / adjudicator / auditor (password: trajlab-demo)"
QUEUES = ("cpu", "gpu")                          # one worker each: neither waits behind the other


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def _is_loopback(host: str) -> bool:
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name other than localhost may resolve to anything
        return False


class Command(BaseCommand):
    help = "Serve the web UI and API, and run one worker for the cpu queue and one for the gpu queue, until Ctrl-C."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", default="8000")
        parser.add_argument("--no-worker", action="store_true", help="do not start the workers")

    def handle(self, *args, host, port, no_worker, **options):
        if not _is_loopback(host) and settings.SECRET_KEY == settings.TRAJLAB_EMBEDDED_SECRET_KEY:
            raise CommandError(
                f"refusing to serve on {host}: the embedded secret key is public, so anyone who can reach "
                "this address could forge sessions. Set DJANGO_SECRET_KEY to a long random value "
                "(e.g. python -c 'import secrets; print(secrets.token_urlsafe(50))'), or serve on 127.0.0.1.")
        workers = {} if no_worker else {queue: subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", queue, "-c", "1",
             "--loglevel", "INFO", "-n", f"embedded-{queue}-{os.getpid()}@%h"],
            env=os.environ.copy(), cwd=settings.BASE_DIR) for queue in QUEUES}
        broker = settings.CELERY_BROKER_URL.split("://")[0]
        db = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
        running = ", ".join(f"{queue} pid {w.pid}" for queue, w in workers.items()) or "none"
        self.stdout.write(self.style.SUCCESS(
            f"\nTrajlab is running at http://{host}:{port}/  (API docs: http://{host}:{port}/api/docs/)\n"
            f"  demo logins: {DEMO_LOGINS}\n"
            f"  database: {db}, broker: {broker}, workers: {running}\n"
            "  stop with Ctrl-C\n"))
        # A SIGTERM (from a process manager, or kill) ends the server like Ctrl-C does, so the
        # workers below are always stopped with it.
        signal.signal(signal.SIGTERM, _interrupt)
        try:
            # --nostatic: config.urls serves /static/ (common.static), where a traversal is a 404.
            send_without_delay()
            call_command("runserver", f"{host}:{port}", "--nostatic", "--noreload", "--skip-checks")
        finally:
            live = [w for w in workers.values() if w.poll() is None]
            for worker in live:
                worker.send_signal(signal.SIGTERM)   # warm shutdown: each finishes or requeues its task
            for worker in live:
                try:
                    worker.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    worker.kill()
