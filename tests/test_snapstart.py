"""lambda_fn.snapstart: the SnapStart runtime hooks are registered only where `snapshot_restore_py` exists, and do
what they claim, run the way Lambda runs them (before-snapshot hooks, then after-restore hooks).

`snapshot_restore_py` exists only in Lambda's Python runtimes, so a fake one with the real library's interface
(registries of (function, args, kwargs)) is put in `sys.modules`. The connection test uses a real botocore client
against a real HTTP/1.1 server on 127.0.0.1 that records which TCP connection each request came on.
"""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import types
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import boto3
import pytest

from lambda_fn import snapstart

ROOT = Path(__file__).resolve().parent.parent
Hook = tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class FakeSnapshotRestore(types.ModuleType):
    """`snapshot_restore_py` as Lambda's runtimes ship it: two registries the runtime runs around the snapshot."""

    def __init__(self) -> None:
        super().__init__("snapshot_restore_py")
        self.before_snapshot: list[Hook] = []
        self.after_restore: list[Hook] = []

    def register_before_snapshot(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Callable[..., Any]:
        self.before_snapshot.append((func, args, kwargs))
        return func

    def register_after_restore(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Callable[..., Any]:
        self.after_restore.append((func, args, kwargs))
        return func

    def snapshot(self) -> None:
        for func, args, kwargs in reversed(self.before_snapshot):  # the runtime's order: reverse of registration
            func(*args, **kwargs)

    def restore(self) -> None:
        for func, args, kwargs in self.after_restore:
            func(*args, **kwargs)


@pytest.fixture
def runtime(monkeypatch: pytest.MonkeyPatch) -> FakeSnapshotRestore:
    fake = FakeSnapshotRestore()
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", fake)
    return fake


@pytest.fixture(autouse=True)
def keep_random_state() -> Iterator[None]:
    state = random.getstate()
    yield
    random.setstate(state)


# --- registration ---------------------------------------------------------------------------------------------


def test_hooks_are_registered_where_the_runtime_provides_snapshot_restore_py(runtime: FakeSnapshotRestore) -> None:
    assert snapstart.register_hooks() is True
    assert runtime.before_snapshot == [(snapstart.close_pooled_connections, (), {})]
    assert runtime.after_restore == [(snapstart.reseed_random, (), {})]


def test_elsewhere_nothing_is_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", None)  # None in sys.modules: the import fails
    assert snapstart.register_hooks() is False


@pytest.mark.slow  # starts a process (tests/conftest.py)
def test_importing_the_module_imports_nothing_else() -> None:
    """Off Lambda (and on Lambda without SnapStart) the module costs its own import only."""
    code = (
        "import sys; before = set(sys.modules); import lambda_fn.snapstart; "
        "print(' '.join(sorted(set(sys.modules) - before)))"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert set(result.stdout.split()) <= {"lambda_fn", "lambda_fn.snapstart", "__future__"}


# --- before the snapshot: no connection from init survives into it -----------------------------------------------


class _RecordingHandler(BaseHTTPRequestHandler):
    """Answers every DynamoDB call with `{}` over keep-alive HTTP/1.1, noting the connection (client address)."""

    protocol_version = "HTTP/1.1"
    server: _RecordingServer

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.server.connections.append(self.client_address)
        body = b"{}"
        self.send_response(200)
        self.send_header("Content-Type", "application/x-amz-json-1.0")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _RecordingServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _RecordingHandler)
        self.connections: list[tuple[str, int]] = []


@pytest.fixture
def server() -> Iterator[_RecordingServer]:
    server = _RecordingServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def test_connections_opened_during_init_are_closed_before_the_snapshot(
    runtime: FakeSnapshotRestore, server: _RecordingServer
) -> None:
    session = boto3.session.Session(aws_access_key_id="test", aws_secret_access_key="test", region_name="us-east-1")
    client = session.client("dynamodb", endpoint_url=f"http://127.0.0.1:{server.server_address[1]}")

    def get() -> None:
        client.get_item(TableName="tools", Key={"pk": {"S": "meta"}})

    get()  # init: the gateway reads its tool store
    get()
    assert len(set(server.connections)) == 1  # kept alive and reused: this is what the snapshot would hold
    snapstart.register_hooks()
    runtime.snapshot()
    runtime.restore()
    get()  # the first request after a restore
    assert len(server.connections) == 3
    assert server.connections[2] != server.connections[1]  # a new connection, not the one from init


def test_without_urllib3_loaded_there_is_nothing_to_close(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "urllib3", raising=False)
    assert snapstart.close_pooled_connections() == 0


# --- after each restore: instances stop sharing one random sequence --------------------------------------------


def _restored_instance(snapshot_state: Any, runtime: FakeSnapshotRestore) -> list[float]:
    random.setstate(snapshot_state)  # what every instance resumes with
    runtime.restore()
    return [random.random() for _ in range(4)]


def test_restored_instances_draw_different_random_numbers(runtime: FakeSnapshotRestore) -> None:
    snapshot_state = random.getstate()
    random.setstate(snapshot_state)
    unhooked = [random.random() for _ in range(4)]
    random.setstate(snapshot_state)
    assert [random.random() for _ in range(4)] == unhooked  # without the hook, every instance draws the same

    snapstart.register_hooks()
    first, second = _restored_instance(snapshot_state, runtime), _restored_instance(snapshot_state, runtime)
    assert first != second
    assert unhooked not in (first, second)


def test_the_reseed_differs_even_if_the_os_generator_came_out_of_the_snapshot_alike(
    runtime: FakeSnapshotRestore, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import time

    monkeypatch.setattr(os, "urandom", lambda size: bytes(size))
    restore_times = iter([1_700_000_000_000_000_001, 1_700_000_000_000_000_002])
    monkeypatch.setattr(time, "time_ns", lambda: next(restore_times))
    snapstart.register_hooks()
    snapshot_state = random.getstate()
    assert _restored_instance(snapshot_state, runtime) != _restored_instance(snapshot_state, runtime)
