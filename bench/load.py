"""Load test: N concurrent MCP clients against `progressive-mcp serve` over real HTTP; figures, not pass/fail on time.

Each client is a thread with its own keep-alive connection and API key, half of them speaking the handshake
era (initialize, then 2025-11-25 requests) and half the stateless 2026-07-28 revision (server/discover, a
`_meta` envelope and Mcp-* headers on every request). A client runs agent-like sessions until the time is
up: connect, tools/list, TOOL_LIST, then tasks of TOOL_SEARCH → TOOL_GET → TOOL_CALL over a mix of tools,
symbols and parameters against the offline sample upstream (a few calls carry a deliberate mistake and must
come back as isError). Every answer is checked; the script exits 1 if any request failed (a correctness
failure) and reports throughput, latency percentiles per request kind, the response-cache hit mix, and the
server's memory (VmRSS/VmHWM from /proc) before and after.

    .venv/bin/python bench/load.py                       # 16 clients, 30 s, starts its own server
    .venv/bin/python bench/load.py --clients 4 --duration 10 --json
    .venv/bin/python bench/load.py --url http://127.0.0.1:8000/mcp --pid 1234   # an already-running server

Without --url it starts `progressive-mcp serve --sample-upstream` on a free port (the synthetic upstream then
runs inside the server process, so its CPU and memory count as the server's).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import random
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
HANDSHAKE_VERSION = "2025-11-25"
MODERN_VERSION = "2026-07-28"
CLIENT_INFO = {"name": "progressive-mcp-load", "version": "1"}
META_TOOLS = ["TOOL_LIST", "TOOL_SEARCH", "TOOL_GET", "TOOL_CALL"]
TASKS_PER_SESSION = 8
MISTAKE_RATE = 0.03
STOCKS = ["IBM", "AAPL", "MSFT", "NVDA", "TSLA", "SPY"]
CURRENCIES = ["USD", "EUR", "GBP", "JPY", "BTC", "ETH"]
COMPANIES = ["international business machines", "apple", "microsoft", "nvidia", "tesla", "s&p 500 etf"]


@dataclass(frozen=True)
class Task:
    """What an agent wants: the search it types, the tool it then fetches and calls, and the arguments."""

    query: str
    tool: str
    arguments: dict[str, Any]


def _technical(rng: random.Random) -> dict[str, Any]:
    # time_period varies widely, so these calls keep missing the response cache for most of a run.
    interval = rng.choice(["daily", "weekly", "monthly"])
    return {
        "symbol": rng.choice(STOCKS),
        "interval": interval,
        "time_period": rng.randint(5, 200),
        "series_type": "close",
    }


# (weight, task builder): quotes and daily series dominate, as they do in agents' traffic.
TASK_MIX: list[tuple[int, Callable[[random.Random], Task]]] = [
    (6, lambda r: Task(f"current stock price of {r.choice(COMPANIES)}", "GLOBAL_QUOTE", {"symbol": r.choice(STOCKS)})),
    (4, lambda r: Task("daily open high low close history", "TIME_SERIES_DAILY", {"symbol": r.choice(STOCKS)})),
    (
        2,
        lambda r: Task(
            "intraday prices every few minutes",
            "TIME_SERIES_INTRADAY",
            {"symbol": r.choice(STOCKS), "interval": r.choice(["5min", "15min", "30min", "60min"])},
        ),
    ),
    (2, lambda r: Task("company fundamentals and sector", "OVERVIEW", {"symbol": r.choice(STOCKS)})),
    (
        3,
        lambda r: Task(
            "exchange rate between two currencies",
            "CURRENCY_EXCHANGE_RATE",
            dict(zip(("from_currency", "to_currency"), r.sample(CURRENCIES, 2), strict=True)),
        ),
    ),
    (2, lambda r: Task("relative strength index momentum", "RSI", _technical(r))),
    (2, lambda r: Task("simple moving average", "SMA", _technical(r))),
    (2, lambda r: Task("find the ticker symbol of a company", "SYMBOL_SEARCH", {"keywords": r.choice(COMPANIES)})),
    (1, lambda r: Task("us gdp growth", "REAL_GDP", {"interval": r.choice(["annual", "quarterly"])})),
    (1, lambda r: Task("inflation consumer prices", "CPI", {"interval": r.choice(["monthly", "semiannual"])})),
]
# Mistakes agents make; each must come back as an isError result, not a success and not a protocol error.
MISTAKES: list[dict[str, Any]] = [
    {"tool_name": "GLOBAL_QOUTE", "arguments": {"symbol": "IBM"}},  # a misspelt tool
    {"tool_name": "GLOBAL_QUOTE", "arguments": {"symbol": "IBM", "interval": "5min"}},  # an argument it lacks
    {"tool_name": "TIME_SERIES_DAILY", "arguments": {}},  # a required argument missing
]


def schema_of(tool: str) -> Callable[[dict[str, Any]], bool]:
    """Whether a TOOL_GET answer holds `tool`'s schema."""
    return lambda data: data["tools"][0]["name"] == tool and "inputSchema" in data["tools"][0]


class Failed(Exception):
    """A request's answer was not what it should be; `kind` classifies it for the report."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind


@dataclass
class ClientStats:
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: Counter[str] = field(default_factory=Counter)
    error_samples: list[str] = field(default_factory=list)
    sessions: int = 0


class LoadClient:
    """One simulated agent: a keep-alive HTTP connection, a key, a protocol era and a seeded random plan."""

    def __init__(self, index: int, url: str, deadline: float, seed: int, timeout_s: float) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        separator = "&" if parts.query else "?"
        self.target = f"{parts.path or '/'}{'?' + parts.query if parts.query else ''}{separator}apikey=load-{index}"
        self.modern = index % 2 == 1
        self.deadline = deadline
        self.rng = random.Random(seed * 1000 + index)
        self.timeout_s = timeout_s
        self.stats = ClientStats()
        self.next_id = 0
        self.connection: http.client.HTTPConnection | None = None
        self.weights = [weight for weight, _ in TASK_MIX]
        self.builders = [builder for _, builder in TASK_MIX]

    def run(self) -> None:
        try:
            while time.monotonic() < self.deadline:
                self.session()
        finally:
            if self.connection is not None:
                self.connection.close()

    def session(self) -> None:
        self.stats.sessions += 1
        if self.modern:
            discovered = self.rpc("server/discover", {})
            if discovered is not None and "supportedVersions" not in discovered:
                self.fail("server/discover", "bad_result", "no supportedVersions")
        else:
            initialized = self.rpc(
                "initialize", {"protocolVersion": HANDSHAKE_VERSION, "capabilities": {}, "clientInfo": CLIENT_INFO}
            )
            if initialized is not None and initialized.get("protocolVersion") != HANDSHAKE_VERSION:
                self.fail("initialize", "bad_result", f"protocolVersion {initialized.get('protocolVersion')}")
            self.notify("notifications/initialized")
        listed = self.rpc("tools/list", {})
        if listed is not None and [tool.get("name") for tool in listed.get("tools", [])] != META_TOOLS:
            self.fail("tools/list", "bad_result", "not the four meta-tools")
        self.tool("TOOL_LIST", {}, lambda data: data.get("tool_count", 0) > 0)
        for _ in range(TASKS_PER_SESSION):
            if time.monotonic() >= self.deadline:
                return  # stop at the deadline rather than finish the session
            if self.rng.random() < MISTAKE_RATE:
                self.tool("TOOL_CALL", self.rng.choice(MISTAKES), expect_error=True)
                continue
            task = self.rng.choices(self.builders, self.weights)[0](self.rng)
            self.tool("TOOL_SEARCH", {"query": task.query}, lambda data: bool(data.get("results")))
            self.tool("TOOL_GET", {"tool_name": task.tool}, schema_of(task.tool))
            self.tool("TOOL_CALL", {"tool_name": task.tool, "arguments": task.arguments}, lambda data: "data" in data)

    # --- one request each ---------------------------------------------------------------------

    def tool(
        self,
        name: str,
        arguments: dict[str, Any],
        valid: Callable[[dict[str, Any]], bool] = lambda data: True,
        *,
        expect_error: bool = False,
    ) -> None:
        kind = f"{name} (expected isError)" if expect_error else name
        result = self.rpc("tools/call", {"name": name, "arguments": arguments}, kind=kind)
        if result is None:
            return
        structured = result.get("structuredContent")
        if bool(result.get("isError")) != expect_error:
            text = json.dumps(structured)[:200]
            self.fail(kind, "unexpected_isError" if not expect_error else "missing_isError", text)
        elif not isinstance(structured, dict):
            self.fail(kind, "bad_result", "no structuredContent")
        elif not expect_error:
            try:
                ok = valid(structured)
            except (KeyError, IndexError, TypeError):
                ok = False
            if not ok:
                self.fail(kind, "bad_result", json.dumps(structured)[:200])
            elif name == "TOOL_CALL":  # split the call's latency by where the answer came from
                source = "response cache" if "cached_at" in structured else "upstream"
                latencies = self.stats.latencies
                latencies[f"TOOL_CALL ({source})"].append(latencies["TOOL_CALL"].pop())

    def rpc(self, method: str, params: dict[str, Any], *, kind: str | None = None) -> dict[str, Any] | None:
        """Send one request; its result, or None after recording why it failed."""
        kind = kind or method
        self.next_id += 1
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if self.modern:
            params = {
                **params,
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
                    "io.modelcontextprotocol/clientCapabilities": {},
                },
            }
            headers.update({"MCP-Protocol-Version": MODERN_VERSION, "Mcp-Method": method})
            if method == "tools/call":
                headers["Mcp-Name"] = params["name"]
        elif method != "initialize":
            headers["MCP-Protocol-Version"] = HANDSHAKE_VERSION
        body = json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        try:
            status, payload = self.post(body, headers, kind)
        except Failed as exc:
            self.fail(kind, exc.kind, str(exc))
            return None
        if status != 200:
            self.fail(kind, "http_status", f"HTTP {status}: {payload[:200]!r}")
            return None
        try:
            message = json.loads(payload)
        except ValueError:
            self.fail(kind, "bad_json", repr(payload[:200]))
            return None
        if "error" in message:
            self.fail(kind, "jsonrpc_error", json.dumps(message["error"])[:200])
            return None
        if message.get("id") != self.next_id or not isinstance(message.get("result"), dict):
            self.fail(kind, "bad_result", json.dumps(message)[:200])
            return None
        result: dict[str, Any] = message["result"]
        return result

    def notify(self, method: str) -> None:
        headers = {"Content-Type": "application/json", "MCP-Protocol-Version": HANDSHAKE_VERSION}
        try:
            status, payload = self.post(json.dumps({"jsonrpc": "2.0", "method": method}), headers, method)
        except Failed as exc:
            self.fail(method, exc.kind, str(exc))
            return
        if status != 202:
            self.fail(method, "http_status", f"HTTP {status}, expected 202: {payload[:200]!r}")

    def post(self, body: str, headers: dict[str, str], kind: str) -> tuple[int, bytes]:
        """POST on the kept-alive connection (reopened after a failure); records the latency."""
        started = time.perf_counter()
        try:
            if self.connection is None:
                self.connection = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)
            self.connection.request("POST", self.target, body=body.encode(), headers=headers)
            response = self.connection.getresponse()
            payload = response.read()
        except (OSError, http.client.HTTPException) as exc:
            if self.connection is not None:
                self.connection.close()
            self.connection = None
            raise Failed("transport", f"{type(exc).__name__}: {exc}") from None
        self.stats.latencies[kind].append(time.perf_counter() - started)
        if response.will_close:
            self.connection.close()
            self.connection = None
        return response.status, payload

    def fail(self, kind: str, error: str, detail: str) -> None:
        self.stats.errors[f"{error}: {kind}"] += 1
        sample = f"{kind}: {error}: {detail}"
        if len(self.stats.error_samples) < 5 and sample not in self.stats.error_samples:
            self.stats.error_samples.append(sample)


# --- the server and the machine ----------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def progressive_mcp_command() -> list[str]:
    script = Path(sys.executable).parent / "progressive-mcp"
    return [str(script)] if script.exists() else [sys.executable, "-m", "progressive_mcp.cli"]


@contextmanager
def listening(name: str, command: list[str], port: int, log: IO[str]) -> Iterator[subprocess.Popen[bytes]]:
    """Run `command` until the block ends, once something accepts connections on `port`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PMCP_") and k != "ALPHAVANTAGE_API_KEY"}
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                log.seek(0)
                raise SystemExit(f"{name} exited with {process.returncode}:\n{log.read()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit(f"{name} did not start listening within 30 s") from None
                time.sleep(0.1)
        yield process
        if process.poll() is not None:
            log.seek(0)
            print(f"{name} exited during the run:\n{log.read()[-2000:]}", file=sys.stderr)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


@dataclass
class Target:
    url: str
    description: str
    server_pid: int | None = None
    upstream_pid: int | None = None


@contextmanager
def target(args: argparse.Namespace, log: IO[str]) -> Iterator[Target]:
    """The endpoint under load: the given --url, or `progressive-mcp serve` started (and stopped) here."""
    if args.url:
        yield Target(args.url, "given by --url", args.pid)
        return
    flags = ["--no-cache"] if args.no_cache else []
    port = free_port()
    serve = [*progressive_mcp_command(), "serve", "--port", str(port), *flags]
    url = f"http://127.0.0.1:{port}/mcp"
    if not args.separate_upstream:
        described = f"progressive-mcp serve --sample-upstream {' '.join(flags)}".strip()
        note = "the synthetic upstream runs in the server's process, so its CPU and memory count as the server's"
        with listening("progressive-mcp serve", [*serve, "--sample-upstream"], port, log) as server:
            yield Target(url, f"{described} (pid {server.pid}, started here; {note})", server.pid)
        return
    upstream_port = free_port()
    upstream = [sys.executable, "-m", "progressive_mcp.offline.sample_upstream", "--port", str(upstream_port)]
    upstream_url = f"http://127.0.0.1:{upstream_port}/query"
    with (
        listening("the sample upstream", upstream, upstream_port, log) as sample,
        listening("progressive-mcp serve", [*serve, "--upstream", upstream_url], port, log) as server,
    ):
        described = f"progressive-mcp serve --upstream {upstream_url} {' '.join(flags)}".strip()
        note = f"the synthetic upstream in its own process, pid {sample.pid}"
        yield Target(url, f"{described} (pid {server.pid}, started here; {note})", server.pid, sample.pid)


def process_state(pid: int | None) -> dict[str, Any] | None:
    """VmRSS, VmHWM (MB), thread count and CPU seconds of a process, from /proc; None if unreadable."""
    if pid is None:
        return None
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    ticks = os.sysconf("SC_CLK_TCK")
    after_name = stat.rsplit(")", 1)[1].split()  # the command name may hold spaces; fields follow its ")"
    cpu_s = (int(after_name[11]) + int(after_name[12])) / ticks  # utime + stime
    return {
        "vm_rss_mb": round(int(fields["VmRSS"].split()[0]) / 1024, 1),
        "vm_hwm_mb": round(int(fields["VmHWM"].split()[0]) / 1024, 1),
        "threads": int(fields["Threads"]),
        "cpu_s": round(cpu_s, 2),
    }


def machine() -> dict[str, Any]:
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


def load_average() -> list[float]:
    return [round(value, 2) for value in os.getloadavg()] if hasattr(os, "getloadavg") else []


def client_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# --- the run and the report ------------------------------------------------------------------------


def percentile(ordered: list[float], fraction: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    rank = max(1, min(len(ordered), round(fraction * len(ordered) + 0.5)))
    return ordered[rank - 1]


def summary(latencies: list[float], elapsed_s: float) -> dict[str, Any]:
    ordered = sorted(latencies)
    ms = {
        f"{name}_ms": round(percentile(ordered, q) * 1000, 2) for name, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))
    }
    return {
        "count": len(ordered),
        "per_s": round(len(ordered) / elapsed_s, 1),
        **ms,
        "max_ms": round(ordered[-1] * 1000, 2),
    }


def sample_rss(pid: int | None, every_s: float, stop: threading.Event, into: list[tuple[float, float]]) -> None:
    """(seconds since start, VmRSS MB) of the server every `every_s`, so growth shows as a plateau or a slope."""
    started = time.perf_counter()
    while not stop.wait(every_s):
        state = process_state(pid)
        if state is not None:
            into.append((round(time.perf_counter() - started, 1), state["vm_rss_mb"]))


def run_load(
    url: str, clients: int, duration_s: float, seed: int, timeout_s: float, pid: int | None = None
) -> dict[str, Any]:
    deadline = time.monotonic() + duration_s
    workers = [LoadClient(index, url, deadline, seed, timeout_s) for index in range(clients)]
    threads = [threading.Thread(target=worker.run, name=f"load-client-{i}") for i, worker in enumerate(workers)]
    rss_over_time: list[tuple[float, float]] = []
    stop_sampling = threading.Event()
    sampler = threading.Thread(target=sample_rss, args=(pid, duration_s / 10, stop_sampling, rss_over_time))
    started = time.perf_counter()
    sampler.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed_s = time.perf_counter() - started
    stop_sampling.set()
    sampler.join()
    by_kind: dict[str, list[float]] = defaultdict(list)
    errors: Counter[str] = Counter()
    samples: list[str] = []
    for worker in workers:
        for kind, values in worker.stats.latencies.items():
            by_kind[kind].extend(values)
        errors.update(worker.stats.errors)
        samples.extend(worker.stats.error_samples)
    everything = [value for values in by_kind.values() for value in values]
    cached = len(by_kind.get("TOOL_CALL (response cache)", []))
    fetched = len(by_kind.get("TOOL_CALL (upstream)", []))
    return {
        "elapsed_s": round(elapsed_s, 2),
        "sessions": sum(worker.stats.sessions for worker in workers),
        "requests": len(everything),
        "throughput_per_s": round(len(everything) / elapsed_s, 1),
        "errors": sum(errors.values()),
        "errors_by_kind": dict(errors.most_common()),
        "error_samples": list(dict.fromkeys(samples))[:10],
        "latency": summary(everything, elapsed_s) if everything else None,
        "latency_by_kind": {kind: summary(values, elapsed_s) for kind, values in sorted(by_kind.items()) if values},
        "tool_call_sources": {"response_cache": cached, "upstream": fetched},
        "server_rss_over_time_mb": rss_over_time,
    }


def print_report(report: dict[str, Any]) -> None:
    config, host = report["config"], report["machine"]
    print(
        f"progressive-mcp load test: {config['clients']} clients for {config['duration_s']:g} s against {config['url']}"
    )
    print(f"  server: {config['server']}")
    print(
        f"  machine: {host['cpu_model']}, {host['cpus']} CPUs, {host['platform']}, Python {host['python']}; "
        f"load average before {' '.join(map(str, report['load_average_before']))}, "
        f"after {' '.join(map(str, report['load_average_after']))}"
    )
    server_cpu, upstream_cpu = report.get("server_cpu_s"), report.get("upstream_cpu_s")
    cpu = f"server {server_cpu:.1f} s, " if server_cpu is not None else ""
    cpu += f"sample upstream {upstream_cpu:.1f} s, " if upstream_cpu is not None else ""
    print(
        f"  CPU used during the run: {cpu}clients {report['client_cpu_s']:.1f} s, over {report['elapsed_s']:.1f} s "
        f"of wall time. The clients (threads of this process) compete with the server for the same "
        f"{host['cpus']} CPUs, so these figures understate what the server alone could do."
    )
    print(
        f"\nrequests: {report['requests']} in {report['elapsed_s']:.1f} s = {report['throughput_per_s']:.1f} req/s "
        f"({report['sessions']} sessions); errors: {report['errors']}"
    )
    header = f"  {'request kind':<32}{'count':>8}{'req/s':>9}{'p50 ms':>9}{'p90 ms':>9}{'p99 ms':>9}{'max ms':>9}"
    print(header)
    rows = [("all", report["latency"]), *report["latency_by_kind"].items()] if report["latency"] else []
    for kind, row in rows:
        print(
            f"  {kind:<32}{row['count']:>8}{row['per_s']:>9.1f}{row['p50_ms']:>9.2f}{row['p90_ms']:>9.2f}"
            f"{row['p99_ms']:>9.2f}{row['max_ms']:>9.1f}"
        )
    sources = report["tool_call_sources"]
    total_calls = sources["response_cache"] + sources["upstream"]
    if total_calls:
        share = 100 * sources["response_cache"] / total_calls
        print(
            f"  successful TOOL_CALLs: {total_calls}, {sources['response_cache']} answered from the response cache "
            f"({share:.0f} %), {sources['upstream']} from the upstream"
        )
    before, after = report["server_before"], report["server_after"]
    if before and after:
        print(
            f"\nserver memory: VmRSS {before['vm_rss_mb']} MB before, {after['vm_rss_mb']} MB after; "
            f"peak (VmHWM) {after['vm_hwm_mb']} MB; threads {before['threads']} before, {after['threads']} after"
        )
        over_time = ", ".join(f"{mb:g} at {at:g} s" for at, mb in report["server_rss_over_time_mb"])
        print(f"  VmRSS during the run: {over_time}")
    else:
        print("\nserver memory: not measured (pass --pid with --url)")
    upstream = report.get("upstream_after")
    if upstream:
        print(f"sample upstream memory after: VmRSS {upstream['vm_rss_mb']} MB, peak {upstream['vm_hwm_mb']} MB")
    if report["errors"]:
        print("\nERRORS by kind:")
        for kind, count in report["errors_by_kind"].items():
            print(f"  {count:>6}  {kind}")
        for sample in report["error_samples"]:
            print(f"  e.g. {sample}")
    else:
        print("errors: none (the target)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--clients", type=int, default=16, help="concurrent clients (threads); default 16")
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of load; default 30")
    parser.add_argument("--url", help="an already-running endpoint (default: start progressive-mcp serve)")
    parser.add_argument("--pid", type=int, help="with --url: the server's process id, to report its memory")
    parser.add_argument("--no-cache", action="store_true", help="start the server with --no-cache")
    parser.add_argument(
        "--separate-upstream",
        action="store_true",
        help="run the sample upstream in its own process (default: in the server's, as serve --sample-upstream)",
    )
    parser.add_argument("--seed", type=int, default=1, help="random seed of the clients' plans")
    parser.add_argument("--timeout", type=float, default=30.0, help="per-request timeout in seconds")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    if args.clients < 1 or args.duration <= 0:
        parser.error("--clients must be at least 1 and --duration positive")

    with tempfile.TemporaryFile("w+") as log, target(args, log) as endpoint:
        before, upstream_before = process_state(endpoint.server_pid), process_state(endpoint.upstream_pid)
        load_before, cpu_before = load_average(), client_cpu_s()
        result = run_load(endpoint.url, args.clients, args.duration, args.seed, args.timeout, endpoint.server_pid)
        after, upstream_after = process_state(endpoint.server_pid), process_state(endpoint.upstream_pid)
        report = {
            "config": {
                "clients": args.clients,
                "duration_s": args.duration,
                "url": endpoint.url,
                "server": endpoint.description,
                "seed": args.seed,
            },
            "machine": machine(),
            "load_average_before": load_before,
            "load_average_after": load_average(),
            "client_cpu_s": round(client_cpu_s() - cpu_before, 2),
            "server_cpu_s": round(after["cpu_s"] - before["cpu_s"], 2) if before and after else None,
            "server_before": before,
            "server_after": after,
            "upstream_cpu_s": round(upstream_after["cpu_s"] - upstream_before["cpu_s"], 2)
            if upstream_before and upstream_after
            else None,
            "upstream_after": upstream_after,
            **result,
        }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_report(report)
    return 1 if report["errors"] or not report["requests"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
