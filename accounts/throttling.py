"""Sign-in lockout: after ``TRAJLAB_LOGIN_MAX_FAILURES`` wrong passwords within
``TRAJLAB_LOGIN_FAILURE_WINDOW_S`` seconds for one username from one client address, every
sign-in attempt for that pair (the right password included) is refused for
``TRAJLAB_LOGIN_LOCKOUT_S`` seconds; after ``TRAJLAB_LOGIN_ADDRESS_MAX_FAILURES`` from one address,
whatever the usernames, that address is. Nobody can lock an account out from elsewhere: its owner,
signing in from their own address, is not refused for what another address tried. Counters live in Django's cache (Redis when ``CACHE_URL`` is set), so every web process
behind one cache shares them. The token endpoint and the login form both ask this module.
"""
from __future__ import annotations

import math
import time

from django.conf import settings
from django.core.cache import cache
from rest_framework.throttling import BaseThrottle

_PREFIX = "trajlab:login"


def client_address(request) -> str:
    """The client's address, trusting ``X-Forwarded-For`` only for ``NUM_PROXIES`` proxies
    (DRF's rule, so API throttles and the login form key on the same address)."""
    return BaseThrottle().get_ident(request)


def _user(username: str) -> str:
    return username.strip().lower()[:150]


def _keys(*, username: str, address: str) -> list[tuple[str, int]]:
    """(counter key, its limit): the address's, and the (username, address) pair's."""
    keys = [(f"{_PREFIX}:ip:{address}", settings.TRAJLAB_LOGIN_ADDRESS_MAX_FAILURES)]
    if username:
        keys.append((f"{_PREFIX}:pair:{address}:{_user(username)}", settings.TRAJLAB_LOGIN_MAX_FAILURES))
    return keys


def login_lockout_remaining(*, username: str, address: str) -> int:
    """Seconds until ``username`` may sign in from ``address`` again; 0 when not locked out."""
    now = time.time()
    until = max((cache.get(f"{key}:locked", 0) for key, _ in _keys(username=username, address=address)), default=0)
    return max(0, math.ceil(until - now))


def login_failure_record(*, username: str, address: str) -> None:
    """Count one wrong password for the (username, address) pair and for the address; lock either
    out once it reaches its limit within the window. ``cache.incr`` is atomic on Redis and in
    local memory."""
    window = settings.TRAJLAB_LOGIN_FAILURE_WINDOW_S
    lockout = settings.TRAJLAB_LOGIN_LOCKOUT_S
    for key, limit in _keys(username=username, address=address):
        cache.add(f"{key}:failures", 0, timeout=window)
        try:
            failures = cache.incr(f"{key}:failures")
        except ValueError:  # expired between add and incr
            cache.set(f"{key}:failures", 1, timeout=window)
            failures = 1
        if failures >= limit:
            cache.set(f"{key}:locked", time.time() + lockout, timeout=lockout + 1)
            cache.delete(f"{key}:failures")


def login_success_record(*, username: str, address: str) -> None:
    """A right password clears the pair's failure count (not the address's)."""
    cache.delete(f"{_PREFIX}:pair:{address}:{_user(username)}:failures")


class LoginLockoutThrottle(BaseThrottle):
    """DRF throttle for sign-in endpoints: refuses (429, ``Retry-After``) while the username in
    the body from the client's address, or the address, is locked out."""

    def allow_request(self, request, view) -> bool:
        data = request.data if isinstance(request.data, dict) else {}
        username = data.get("username") if isinstance(data.get("username"), str) else ""
        self._wait = login_lockout_remaining(username=username, address=client_address(request))
        return self._wait == 0

    def wait(self) -> int:
        return self._wait
