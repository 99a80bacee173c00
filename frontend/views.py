"""The browser UI: Django serves the single-page app's page for every UI path (so links and
reloads land on the right screen); the app itself talks only to the REST API.

The app is built by ``make frontend`` into ``frontend/static/dist/`` (Vite); the build's
manifest names the hashed entry script and stylesheet, which this page links.
"""
from __future__ import annotations

import json
from pathlib import Path

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from common.roles import user_roles

BUILD_DIR = Path(settings.BASE_DIR) / "frontend" / "static" / "dist"
MANIFEST = BUILD_DIR / ".vite" / "manifest.json"
_cache: dict = {"mtime": None, "entry": None}


def app_entry(manifest: Path | None = None) -> dict | None:
    """The built entry's static paths ``{"js": …, "css": [...]}``, or None when there is no
    build. Re-read when the manifest changes, so a rebuild needs no server restart."""
    manifest = manifest or MANIFEST
    try:
        mtime = manifest.stat().st_mtime_ns
    except FileNotFoundError:
        return None
    if _cache["mtime"] != mtime or _cache.get("path") != manifest:
        chunks = json.loads(manifest.read_text())
        entry = next((c for c in chunks.values() if c.get("isEntry")), None)
        if entry is None:
            return None
        _cache.update(mtime=mtime, path=manifest,
                      entry={"js": f"dist/{entry['file']}", "css": [f"dist/{c}" for c in entry.get("css", [])]})
    return _cache["entry"]


@login_required
def spa(request, path: str = ""):
    """The app's page, with the signed-in user (saves a request before the first screen)."""
    entry = app_entry()
    if entry is None:
        return render(request, "spa_missing.html", status=503)
    me = {"id": request.user.id, "username": request.user.username, "roles": sorted(user_roles(request.user))}
    return render(request, "spa.html", {"entry": entry, "me": me})
