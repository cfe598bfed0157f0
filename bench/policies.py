"""What per-identity policies cost: building a policy's surface (once per policy) and a warm request with a policy.

For the bundled Alpha Vantage catalog and each real OpenAPI document in ../shared/openapi (those present), a
server-key endpoint with one policy (`read_only: true`, `deny` of the catalog's first tool) answers: the first
`tools/list` of the identity (narrowing the catalog, building its surface and search index), then warm
`tools/list` and `TOOL_SEARCH` requests, against the same requests by an identity without restrictions.

Then the timing class of a call outside the policy, over real HTTP on 127.0.0.1 (the serve stack), by TOOL_CALL
and by a direct `tools/call`, interleaved: the policy identity calling the tool its policy hides (hidden); the same
name on an endpoint that serves, without a policy, exactly the catalog the policy leaves (absent: what a caller
would compare against); and a made-up name as long, one letter changed (made-up). Each distribution is printed
(p10, p50, p90, p99, mean) with the difference of the medians. hidden and absent take one code path, so their
difference is noise; an unknown name's suggestions cost what its spelling costs (difflib), so made-up may differ
either way. (That hidden and absent answer the same bytes is held by tests/test_policies.py.)

Run with: .venv/bin/python bench/policies.py [--repeat N] [--only NAME] [--timing-rounds N]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from real_documents import REAL  # noqa: E402

from progressive_mcp.policies import Caller  # noqa: E402
from progressive_mcp.settings import Settings  # noqa: E402
from progressive_mcp.sources import load_catalog  # noqa: E402
from progressive_mcp.surfaces.endpoint import Endpoint, HttpRequest  # noqa: E402

NARROW = "narrowed-identity-token-0123456789abcdef"
WHOLE = "whole-catalog-identity-token-0123456789ab"


def digest(token: str) -> str:
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()[:16]


def request(token: str, method: str, params: dict[str, object] | None = None) -> HttpRequest:
    body: dict[str, object] = {"jsonrpc": "2.0", "id": 1, "method": method}
    if params is not None:
        body["params"] = params
    return HttpRequest.build("POST", "/mcp", headers={"Authorization": f"Bearer {token}"}, body=json.dumps(body))


def timed_ms(endpoint: Endpoint, http: HttpRequest) -> float:
    started = time.perf_counter()
    response = endpoint.handle(http)
    elapsed = (time.perf_counter() - started) * 1000
    assert response.status == 200, response.body[:300]
    return elapsed


def measure(name: str, spec: Path | None, repeat: int) -> dict[str, object]:
    catalog = load_catalog(spec)
    policies = {
        "identities": [
            {"token": digest(NARROW), "read_only": True, "deny": [catalog.tools[0].name]},
            {"token": digest(WHOLE)},
        ]
    }
    overrides: dict[str, object] = {"auth_mode": "server-key", "endpoint_tokens": (NARROW, WHOLE), "api_key": "k" * 20}
    if spec is not None:
        overrides["spec_path"] = spec
    settings = Settings.from_env({"PMCP_POLICIES": json.dumps(policies)}, **overrides)
    endpoint = Endpoint.from_settings(settings)
    policies_set = settings.policies
    assert policies_set is not None
    first_ms = timed_ms(endpoint, request(NARROW, "tools/list"))
    caller = Caller(token_digest=hashlib.sha256(NARROW.encode()).hexdigest())
    visible = len(endpoint._policy_surface(policies_set.match(caller)).catalog.tools)
    search = {"name": "TOOL_SEARCH", "arguments": {"query": "list the items of an account"}}
    rows: dict[str, object] = {"catalog": name, "tools": len(catalog), "visible": visible, "first_ms": first_ms}
    for label, token in (("policy", NARROW), ("unrestricted", WHOLE)):
        lists = [timed_ms(endpoint, request(token, "tools/list")) for _ in range(repeat)]
        searches = [timed_ms(endpoint, request(token, "tools/call", search)) for _ in range(repeat)]
        rows[f"{label}_list_ms"] = statistics.median(lists)
        rows[f"{label}_search_ms"] = statistics.median(searches)
    return rows


def made_up(name: str, taken: set[str]) -> str:
    """A name as long as `name` that no tool has: its last letter changed."""
    for letter in "QZXJKqzxjk":
        candidate = name[:-1] + letter
        if candidate != name and candidate not in taken:
            return candidate
    raise AssertionError(f"no made-up name for {name}")


def distribution(samples: list[float]) -> str:
    ordered = sorted(samples)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    mean = statistics.fmean(ordered)
    return f"{at(0.1):6.3f} {at(0.5):6.3f} {at(0.9):6.3f} {at(0.99):7.3f} {mean:6.3f}"


def hidden_vs_unknown(name: str, spec: Path | None, rounds: int) -> list[str]:
    """Lines of the timing table, over real HTTP: a call of the hidden tool (policy), of the same name on an
    endpoint that serves, without a policy, exactly the catalog the policy leaves (absent), and of a made-up name
    of the same length (policy)."""
    import httpx

    from lambda_fn.handler import make_handler
    from lambda_fn.local import LocalServer
    from progressive_mcp.policies import narrow_catalog, parse_policies
    from progressive_mcp.surfaces.surface import Surface

    catalog = load_catalog(spec)
    hidden = catalog.tools[0].name
    unknown = made_up(hidden, {t.name for t in catalog.tools})
    policies = {"identities": [{"token": digest(NARROW), "deny": [hidden]}]}
    overrides: dict[str, object] = {"auth_mode": "server-key", "endpoint_tokens": (NARROW,), "api_key": "k" * 20}
    if spec is not None:
        overrides["spec_path"] = spec
    settings = Settings.from_env({"PMCP_POLICIES": json.dumps(policies)}, **overrides)
    hiding = Endpoint.from_settings(settings)
    narrowed = narrow_catalog(hiding.surface.catalog, parse_policies(policies).entries[0].policy)
    plain = Settings.from_env({}, **overrides)
    absent = Endpoint(Surface(narrowed, upstream=hiding.surface.upstream), plain)
    lines = []
    with (
        LocalServer(make_handler(hiding), port=0) as hiding_server,
        LocalServer(make_handler(absent), port=0) as absent_server,
        httpx.Client() as client,
    ):
        headers = {"Authorization": f"Bearer {NARROW}"}
        routes = {
            "TOOL_CALL": ("", lambda tool: {"name": "TOOL_CALL", "arguments": {"tool_name": tool, "arguments": {}}}),
            "direct": ("?mode=direct", lambda tool: {"name": tool, "arguments": {}}),
        }
        series = {
            "hidden": (hiding_server, hidden),
            "absent": (absent_server, hidden),
            "made-up": (hiding_server, unknown),
        }
        for route, (query, params) in routes.items():
            times: dict[str, list[float]] = {label: [] for label in series}
            for index in range(rounds + 20):  # the first 20 warm the connections and the policy's surface
                labels = list(series)
                for label in labels[index % 3 :] + labels[: index % 3]:  # each series first in turn
                    server, tool = series[label]
                    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params(tool)}
                    started = time.perf_counter()
                    response = client.post(server.url + query, json=body, headers=headers, timeout=30)
                    elapsed = (time.perf_counter() - started) * 1000
                    assert '"UnknownTool"' in response.text or '"code":-32602' in response.text, response.text[:300]
                    if index >= 20:
                        times[label].append(elapsed)
            median = {label: statistics.median(values) for label, values in times.items()}
            notes = {
                "hidden": "",
                "absent": f"   p50 hidden - absent {median['hidden'] - median['absent']:+.3f} ms",
                "made-up": f"   p50 hidden - made-up {median['hidden'] - median['made-up']:+.3f} ms",
            }
            for number, label in enumerate(series):
                first = f"{name:<14} {route:<9}" if number == 0 else f"{'':<14} {'':<9}"
                lines.append(f"{first} {label:<7} {distribution(times[label])}{notes[label]}")
    return lines


def main() -> None:
    import logging
    import os

    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")  # the serve stack's log lines and metrics, one per call
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    logging.getLogger().setLevel(logging.WARNING)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--only", help="one catalog: alphavantage or a real document's short name")
    parser.add_argument("--timing-rounds", type=int, default=500, help="calls of each name in the timing table")
    args = parser.parse_args()
    documents: list[tuple[str, Path | None]] = [("alphavantage", None)]
    documents += [(name, path) for name, path in REAL.items() if path.is_file()]
    documents = [(name, path) for name, path in documents if args.only in (None, name)]
    print(
        "catalog        tools visible  first request  tools/list p50 (policy / none)  TOOL_SEARCH p50 (policy / none)"
    )
    for name, path in documents:
        row = measure(name, path, args.repeat)
        print(
            f"{name:<14} {row['tools']:>5} {row['visible']:>7} {row['first_ms']:>11.1f} ms"
            f"  {row['policy_list_ms']:>9.3f} / {row['unrestricted_list_ms']:.3f} ms"
            f"  {row['policy_search_ms']:>13.3f} / {row['unrestricted_search_ms']:.3f} ms"
        )
    print()
    print(
        f"a call outside the policy vs a name that does not exist, over HTTP, {args.timing_rounds} calls of each (ms)"
    )
    print("catalog        route     series    p10    p50    p90     p99   mean")
    for name, path in documents:
        for line in hidden_vs_unknown(name, path, args.timing_rounds):
            print(line)


if __name__ == "__main__":
    main()
