"""Code-mode fairness: how many of the sandbox's workers one caller, and one network address, may hold at once.

Every caller's scripts run on one small pool of worker processes. Left alone, a few endless scripts from one
caller hold every worker and everyone else's scripts wait and fail. So a caller may hold at most its share of
the pool (half of it), and all the callers from one network address together all of it but one worker, so
that keys one client invents (each a new caller in passthrough mode) cannot fill it either. A script over a
share is refused at once, saying after how many seconds one of the scripts in the way will have ended; a
script within its shares that finds the pool full with other callers' scripts waits for a worker, never past
its own deadline. Example::

    shares = WorkerShares(4)
    with shares.hold(caller_id("key", api_key), "203.0.113.7", ends_at=time.monotonic() + 20):
        ...  # run the script on a worker
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import math
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

# A caller's id is a keyed digest of its key or token, the key drawn per process: the id never shows the secret,
# and an id seen anywhere cannot be tested against guesses of it.
_ID_KEY = secrets.token_bytes(32)
IPV6_GROUP_PREFIX = 64  # one IPv6 host commonly has a whole /64 to pick addresses from


class SandboxBusy(Exception):
    """A script refused a worker: over its caller's or its address's share, or the pool stayed full until its
    deadline. The message starts with "busy:" and ends with when to retry; `retry_after_s` says the same."""

    def __init__(self, message: str, retry_after_s: int) -> None:
        self.retry_after_s = retry_after_s
        super().__init__(message)


def caller_id(kind: str, secret: str) -> str:
    """The identity of the caller presenting `secret` (kind "key": its upstream key; "token": its bearer token)."""
    digest = hmac.new(_ID_KEY, f"{kind}\0{secret}".encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()
    return f"{kind}:{digest[:32]}"


def address_group(address: str | None) -> str | None:
    """The network a client address stands for in the address share: an IPv4 address (an IPv4-mapped IPv6 one
    too) itself, an IPv6 address its /64; text that is no address, itself."""
    if address is None:
        return None
    try:
        parsed = ipaddress.ip_address(address.strip())
    except ValueError:
        return address
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        return str(parsed.ipv4_mapped)
    if isinstance(parsed, ipaddress.IPv6Address):
        return str(ipaddress.IPv6Network((parsed, IPV6_GROUP_PREFIX), strict=False))
    return str(parsed)


@dataclass(frozen=True)
class _Hold:
    caller: str | None
    group: str | None
    ends_at: float


class WorkerShares:
    """Admission to a pool of `workers`: at most `per_caller` held by one caller (default half the pool) and
    `per_address` by one network address (default all but one worker). A caller of None is a process's only
    caller (stdio) and has no share but the pool; an address of None is not known (nor bounded). Thread-safe."""

    def __init__(
        self,
        workers: int,
        *,
        per_caller: int | None = None,
        per_address: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.workers = workers
        self.per_caller = per_caller if per_caller is not None else max(1, workers // 2)
        self.per_address = per_address if per_address is not None else max(1, workers - 1)
        self.clock = clock
        self._holds: list[_Hold] = []
        self._changed = threading.Condition()

    @property
    def held(self) -> int:
        """Workers held now."""
        with self._changed:
            return len(self._holds)

    @contextmanager
    def hold(self, caller: str | None, address: str | None, ends_at: float) -> Iterator[None]:
        """Hold a worker for a script that must end by `ends_at` (the clock's time); raises SandboxBusy."""
        hold = self._admit(_Hold(caller, address_group(address), ends_at))
        try:
            yield
        finally:
            with self._changed:
                self._holds.remove(hold)
                self._changed.notify_all()

    def _admit(self, hold: _Hold) -> _Hold:
        with self._changed:
            while True:
                now = self.clock()
                mine = [h for h in self._holds if hold.caller is not None and h.caller == hold.caller]
                if len(mine) >= self.per_caller:
                    wait = _retry_after(mine, now)
                    raise SandboxBusy(
                        f"busy: you already run {len(mine)} scripts at once, your share of this server's "
                        f"{self.workers} sandbox workers; retry after {wait} s, when one of them will have ended",
                        wait,
                    )
                near = [h for h in self._holds if hold.group is not None and h.group == hold.group]
                if len(near) >= self.per_address:
                    wait = _retry_after(near, now)
                    raise SandboxBusy(
                        f"busy: scripts from your network address already hold {len(near)} of this server's "
                        f"{self.workers} sandbox workers, the most one address may hold; retry after {wait} s",
                        wait,
                    )
                if len(self._holds) < self.workers:
                    self._holds.append(hold)
                    return hold
                left = hold.ends_at - now
                if left <= 0:
                    wait = _retry_after(self._holds, now)
                    raise SandboxBusy(
                        f"busy: all {self.workers} of this server's sandbox workers stayed busy until this "
                        f"script's deadline; retry after {wait} s",
                        wait,
                    )
                self._changed.wait(left)


def _retry_after(holds: list[_Hold], now: float) -> int:
    """Whole seconds until the first of `holds` must have ended (at least 1)."""
    return max(1, math.ceil(min(h.ends_at for h in holds) - now))
