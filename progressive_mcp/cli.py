"""The `progressive-mcp` command: run the stdio server, check a spec, report token counts.

Example::

    progressive-mcp spec check spec/alphavantage.yaml
    progressive-mcp stdio --mode hybrid
    progressive-mcp tokens
    progressive-mcp sync --servers ~/.config/Claude/claude_desktop_config.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

from progressive_mcp.errors import ProgressiveMCPError
from progressive_mcp.settings import AUTH_MODES, MODES
from progressive_mcp.sources import default_spec_path, load_catalog

DEFAULT_MANIFEST = "eval/catalogs.yaml"  # `eval --catalogs` without a file


def _spec_check(args: argparse.Namespace) -> int:
    from progressive_mcp.sources import load_catalog_with_report
    from progressive_mcp.sources.openapi import counted

    failed = 0
    for path in args.files or [str(default_spec_path())]:
        try:
            catalog, report = load_catalog_with_report(
                Path(path), include=args.include, exclude=args.exclude, vocabulary=args.vocabulary
            )
        except ProgressiveMCPError as exc:
            print(exc, file=sys.stderr)
            failed += 1
            continue
        in_categories = f"in {counted(len(catalog.categories), 'category')}, version {catalog.version}"
        if report is None:
            print(f"{path}: OK: {counted(len(catalog), 'tool')} {in_categories}")
            continue
        print(f"{report.summary()} {in_categories}")
        for skipped in report.skipped:
            print(f"  skipped {skipped.operation}: {skipped.reason}")
        for note in report.notes:
            print(f"  note: {note}")
        if args.validate or args.strict:
            from progressive_mcp.sources.openapi import validation_findings

            findings = validation_findings(Path(path))
            label = "problem" if args.strict else "warning"
            for finding in findings:
                print(f"  {label} (openapi-spec-validator): {finding}")
            if findings and args.strict:
                failed += 1
    return 1 if failed else 0


def _store_vectors() -> bool:
    """Whether `spec compile` stores the tool documents' vectors: with the semantic extra, unless PMCP_SEMANTIC=off."""
    from progressive_mcp.search import providers
    from progressive_mcp.search.semantic import semantic_enabled

    return providers.active().available() and semantic_enabled()


def _spec_compile(args: argparse.Namespace) -> int:
    import json

    from progressive_mcp.catalog import Catalog
    from progressive_mcp.sources import load_catalog_with_report
    from progressive_mcp.sources.bounded_yaml import safe_load
    from progressive_mcp.sources.compiled import dumps
    from progressive_mcp.sources.openapi import counted
    from progressive_mcp.upstream_auth import AUTH_ENV, KEY_FORMAT_ENV, choose_auth

    source = Path(args.file) if args.file else default_spec_path()
    try:  # validates it first: never compile a broken spec
        vectors = _store_vectors()
        catalog, report = load_catalog_with_report(
            source, include=args.include, exclude=args.exclude, vocabulary=args.vocabulary
        )
        # The auth choice and key format are recorded in the catalog (flags, else the environment's).
        choice, key_format = args.auth or os.environ.get(AUTH_ENV) or None, args.key_format or None
        key_format = key_format if key_format is not None else os.environ.get(KEY_FORMAT_ENV) or None
        if choice is not None or key_format is not None:
            api = choose_auth(
                catalog.api,
                choice,
                key_format,
                origin="--auth" if args.auth else AUTH_ENV,
                format_origin="--key-format" if args.key_format else KEY_FORMAT_ENV,
            )
            catalog = Catalog.build(api, catalog.categories, catalog.tools, catalog.vocabulary)
    except ProgressiveMCPError as exc:
        print(exc, file=sys.stderr)
        return 1
    shaped = choice is not None or key_format is not None
    if args.catalog or report is not None or args.include or args.exclude or shaped:  # loads without the tooling
        text = dumps(catalog, vectors=vectors) + "\n"
    else:  # our own format stays itself, as JSON (it loads through the same validation as the YAML)
        data = safe_load(source.read_text(encoding="utf-8"))
        named = isinstance(data.get("search"), dict) and isinstance(data["search"].get("vocabulary"), str)
        if named or args.vocabulary:
            # The vocabulary file goes inside: the JSON is read without the folder it came from.
            data["search"] = {"vocabulary": dict(catalog.vocabulary.data)}
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n"
    if args.output in (None, "-"):
        sys.stdout.write(text)
    else:
        Path(args.output).write_text(text, encoding="utf-8")
        detail = f" ({report.summary()})" if report is not None else ""
        print(f"{args.output}: {counted(len(catalog), 'tool')}, version {catalog.version}{detail}", file=sys.stderr)
    return 0


def _spec_schema(_args: argparse.Namespace) -> int:
    from progressive_mcp.sources.spec import spec_json_schema_text

    sys.stdout.write(spec_json_schema_text())
    return 0


def _stdio(args: argparse.Namespace) -> int:
    from progressive_mcp.surfaces.stdio import run

    return run(args)


SERVE_NEEDS_CHECKOUT = (
    "progressive-mcp serve runs the Lambda handler in lambda_fn/, which only a source checkout has: "
    "run it from a clone of the repository (make serve), or use `progressive-mcp stdio`"
)


def serve_available() -> bool:
    """Whether `serve` can run here: it runs the Lambda handler (lambda_fn/), which sits beside the package in a
    source checkout and is not in the wheel."""
    checkout = Path(__file__).resolve().parent.parent
    return (checkout / "lambda_fn" / "handler.py").is_file() or importlib.util.find_spec("lambda_fn") is not None


def _serve(args: argparse.Namespace) -> int:
    checkout = Path(__file__).resolve().parent.parent
    if (checkout / "lambda_fn" / "handler.py").is_file() and str(checkout) not in sys.path:
        sys.path.insert(0, str(checkout))
    try:
        from lambda_fn.local import run
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name.split(".")[0] == "lambda_fn":
            print(SERVE_NEEDS_CHECKOUT, file=sys.stderr)
        else:  # the Lambda handler needs the aws extra (Powertools)
            print(f"progressive-mcp serve needs {exc.name}: pip install -e '.[aws]' in the clone", file=sys.stderr)
        return 2
    return run(args)


def _tokens(args: argparse.Namespace) -> int:
    from progressive_mcp.report import token_report

    encodings = ("cl100k", "o200k") if args.tokenizer == "both" else (args.tokenizer,)
    try:
        print(token_report(Path(args.spec) if args.spec else None, as_json=args.json, encodings=encodings))
    except ProgressiveMCPError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


def _eval(args: argparse.Namespace) -> int:
    from progressive_mcp.search.catalogs_eval import catalogs_report
    from progressive_mcp.search.evaluation import evaluation_report

    if args.queries is None and args.catalogs is None:
        args.parser.error("give a QUERIES file or --catalogs [MANIFEST]")
    if args.queries is not None and args.catalogs is not None:
        args.parser.error("give a QUERIES file or --catalogs [MANIFEST], not both")
    if args.catalogs is not None and args.spec:
        args.parser.error("--spec does not go with --catalogs: the manifest names each catalog's spec")
    if args.markdown and (args.catalogs is None or args.json):
        args.parser.error("--markdown goes with --catalogs, without --json")
    if args.outcomes and (args.catalogs is None or not args.json):
        args.parser.error("--outcomes goes with --catalogs --json")
    if args.catalogs is not None and args.vocabulary:
        args.parser.error("--vocabulary does not go with --catalogs: each catalog is measured as its spec is")
    try:
        if args.catalogs is not None:
            text = catalogs_report(
                args.catalogs,
                split=args.split,
                as_json=args.json,
                show_misses=args.show_misses,
                markdown=args.markdown,
                outcomes=args.outcomes,
            )
        else:
            text = evaluation_report(
                args.queries,
                spec_path=args.spec,
                vocabulary=args.vocabulary,
                baseline=args.baseline,
                split=args.split,
                as_json=args.json,
                show_misses=args.show_misses,
            )
        print(text)
    except ProgressiveMCPError as exc:
        print(exc, file=sys.stderr)
        return 2
    return 0


def _sample_upstream(args: argparse.Namespace) -> int:
    from progressive_mcp.offline import rest_upstream, sample_upstream

    if args.spec is not None:
        try:
            catalog = load_catalog(Path(args.spec))
        except ProgressiveMCPError as exc:
            print(exc, file=sys.stderr)
            return 1
        if rest_upstream.has_operations(catalog):
            return rest_upstream.run(catalog, args, args.parser)
        print(
            f"sample upstream: {args.spec} has no REST operations; serving the Alpha Vantage sample",
            file=sys.stderr,
        )
    return sample_upstream.run(args, args.parser)


def add_server_flags(parser: argparse.ArgumentParser) -> None:
    """The flags of a server (stdio and serve), the gateway's --servers and --index among them."""
    parser.add_argument("--spec", help="spec file (env PMCP_SPEC; default: the bundled Alpha Vantage spec)")
    parser.add_argument(
        "--mode",
        choices=MODES,
        help="tool surface (env PMCP_MODE; default progressive); auto: direct when the tools cost at most "
        "PMCP_AUTO_DIRECT_TOKENS in a direct tools/list, else progressive (PMCP_AUTO_FALLBACK=code: code)",
    )
    parser.add_argument("--categories", help="comma-separated categories to expose (env PMCP_CATEGORIES)")
    parser.add_argument("--upstream", help="upstream base URL (env PMCP_UPSTREAM_URL; default from the spec)")
    add_gateway_flags(parser)
    add_filter_flags(parser)
    parser.add_argument(
        "--no-cache",
        dest="cache",
        action="store_false",
        default=None,
        help="answer every call from the upstream (env PMCP_CACHE=off; default: keep answers in memory while fresh)",
    )
    parser.add_argument(
        "--deadline",
        type=float,
        metavar="SECONDS",
        help="time limit of one tool call's upstream work, retries included (env PMCP_DEADLINE_S; default 25)",
    )
    parser.add_argument(
        "--schema-view",
        choices=("json", "compact"),
        help="how TOOL_GET shows a tool's arguments: JSON Schema, or compact lines (`name?: type = default — what "
        "it is`, 15-37%% fewer tokens on the documents measured) (env PMCP_SCHEMA_VIEW; default json)",
    )
    parser.add_argument("--log-level", default="WARNING", help="log level (stdio: WARNING, to stderr; serve: INFO)")


def add_policy_flag(parser: argparse.ArgumentParser) -> None:
    """stdio's `--policy NAME`: which entry of the policies (PMCP_POLICIES_FILE, PMCP_POLICIES) the local user is."""
    parser.add_argument(
        "--policy",
        metavar="NAME",
        help="with PMCP_POLICIES_FILE or PMCP_POLICIES: serve the tools of the entry whose `name` is NAME, at its "
        "rate (env PMCP_POLICY; default: the policies' default, which must not be deny); docs/configuration.md",
    )


def add_gateway_flags(parser: argparse.ArgumentParser, *, required: bool = False, serves: bool = True) -> None:
    """`--servers` and `--index`; `serves`: the command serves the tools (a spec beside them), not only syncs."""
    what = (
        "serve the tools of the MCP servers in this mcpServers JSON"
        if serves
        else "the MCP servers to sync: an mcpServers JSON"
    )
    parser.add_argument(
        "--servers",
        metavar="FILE",
        required=required,
        help=f"{what} (a Claude Desktop, Cursor or VS Code config; env PMCP_SERVERS; docs/gateway.md)"
        + ("; a spec named with --spec is served beside them" if serves else ""),
    )
    parser.add_argument(
        "--index",
        metavar="PATH",
        help="the gateway's tool store, a SQLite file (env PMCP_INDEX; default: one per servers file under "
        "$XDG_CACHE_HOME/progressive-mcp/, else ~/.cache/progressive-mcp/)",
    )


def _sync(args: argparse.Namespace) -> int:
    from progressive_mcp.gateway.gateway import Gateway
    from progressive_mcp.gateway.pins import ApprovalRefused, approve, review, review_text

    try:
        gateway = Gateway.open(args.servers, args.index)
    except ProgressiveMCPError as exc:
        print(f"progressive-mcp: {exc}", file=sys.stderr)
        return 2
    try:
        if args.approve:
            refused = 0
            for named in args.approve:
                try:
                    approve(gateway.store, named)
                except ApprovalRefused as exc:
                    print(f"progressive-mcp: {exc}", file=sys.stderr)
                    refused += 1
                else:
                    print(f"approved: {named}")
            gateway.refresh()
            return 2 if refused else 0
        # The report names each server's failure once: the log lines a server process writes about its servers
        # (the pool's "unavailable", the gateway's "sync of ... failed") would say it twice more.
        reported = logging.StreamHandler(sys.stderr)
        reported.addFilter(lambda record: not hasattr(record, "server"))
        package_logger = logging.getLogger("progressive_mcp")
        package_logger.addHandler(reported)
        try:
            report = gateway.sync()
        finally:
            package_logger.removeHandler(reported)
        reviewed = [review(gateway.store, entry) for entry in gateway.withheld]
    finally:
        gateway.close()
    if args.json:
        body = report.as_json()
        body["catalog_version"] = gateway.catalog.version
        body["withheld"] = reviewed
        print(json.dumps(body, indent=2))
    else:
        print(report.text())
        print(f"catalog version {gateway.catalog.version}: {len(gateway.catalog)} tools")
        for entry in reviewed:
            print(review_text(entry, args.servers))
    return 1 if report.counts["failed"] else 0


def add_filter_flags(parser: argparse.ArgumentParser) -> None:
    terms = "comma-separated tag:NAME, method:GET, path:GLOB or tool-name globs"
    parser.add_argument(
        "--include", help=f"serve only the operations matching any of these ({terms}; env PMCP_INCLUDE)"
    )
    parser.add_argument("--exclude", help=f"leave out the operations matching any of these ({terms}; env PMCP_EXCLUDE)")
    parser.add_argument(
        "--vocabulary",
        metavar="FILE",
        help="a search vocabulary (YAML or JSON) for the catalog, in place of any its spec names; the way to give "
        "one to an OpenAPI document (env PMCP_VOCABULARY; docs/search.md)",
    )


def add_serve_command(commands: Any) -> None:
    serve = commands.add_parser("serve", help="the Lambda handler behind real HTTP on localhost: http://HOST:PORT/mcp")
    add_server_flags(serve)
    serve.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 picks a free one)")
    serve.add_argument("--auth-mode", choices=AUTH_MODES, help="env PMCP_AUTH_MODE (default passthrough)")
    serve.add_argument(
        "--sample-upstream",
        action="store_true",
        help="start the offline sample upstream in-process and send upstream calls to it (any key of 4+ characters "
        "works; in server-key mode a dummy upstream key is set, and a bearer token is made up and printed if "
        "PMCP_ENDPOINT_TOKENS is not set)",
    )
    serve.add_argument(
        "--conformance-fixtures",
        action="store_true",
        help="add the MCP conformance suite's diagnostic tools (test_*) for its server-stateless checks",
    )
    serve.set_defaults(func=_serve, log_level="INFO")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="progressive-mcp", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)

    spec = commands.add_parser("spec", help="check a spec file or print the spec format's JSON Schema")
    spec_commands = spec.add_subparsers(dest="spec_command", required=True)
    check = spec_commands.add_parser(
        "check",
        help="validate spec files or OpenAPI documents; names the tool or operation, field and line of each problem",
    )
    check.add_argument("files", nargs="*", help="spec files or OpenAPI documents (default: the bundled spec)")
    check.add_argument(
        "--validate",
        action="store_true",
        help="OpenAPI: also list what openapi-spec-validator finds against the OpenAPI specification (warnings)",
    )
    check.add_argument("--strict", action="store_true", help="OpenAPI: like --validate, and fail on its findings")
    add_filter_flags(check)
    check.set_defaults(func=_spec_check)
    compile_ = spec_commands.add_parser(
        "compile",
        help="write a spec as compact JSON, or an OpenAPI document as a compiled catalog, for fast cold starts",
    )
    compile_.add_argument("file", nargs="?", help="spec file or OpenAPI document (default: the bundled spec)")
    compile_.add_argument("-o", "--output", help="output file (default: stdout)")
    compile_.add_argument(
        "--catalog",
        action="store_true",
        help="write a compiled catalog for a spec too (what the Lambda asset ships: it loads without pydantic)",
    )
    compile_.add_argument(
        "--auth",
        metavar="CHOICE",
        help="how the key is sent, recorded in the catalog: bearer, basic or apikey:NAME (a securityScheme of the "
        "document; env PMCP_UPSTREAM_AUTH, which also overrides it at run time)",
    )
    compile_.add_argument(
        "--key-format",
        metavar="FORMAT",
        help="the value sent, {key} replaced by the key, e.g. 'Token token={key}', recorded in the catalog (env "
        "PMCP_UPSTREAM_KEY_FORMAT, which also overrides it at run time)",
    )
    add_filter_flags(compile_)
    compile_.set_defaults(func=_spec_compile)
    schema = spec_commands.add_parser("schema", help="print the JSON Schema of the spec format")
    schema.set_defaults(func=_spec_schema)

    stdio = commands.add_parser("stdio", help="run the MCP server over stdio")
    add_server_flags(stdio)
    add_policy_flag(stdio)
    stdio.set_defaults(func=_stdio)

    if serve_available():  # a wheel install has no lambda_fn/: its help does not offer what cannot run
        add_serve_command(commands)

    sync = commands.add_parser(
        "sync",
        help="sync the gateway's tool store with the servers of a servers file; prints each created, updated and "
        "deleted tool (exit 1 if a server could not be read)",
    )
    add_gateway_flags(sync, required=True, serves=False)
    sync.add_argument(
        "--approve",
        nargs="+",
        metavar="SERVER.TOOL@HASH",
        help="approve the pending definition of these withheld tools of pinned servers, each named with the hash "
        "that sync printed for it (a definition with another hash is refused), instead of syncing",
    )
    sync.add_argument("--json", action="store_true", help="machine-readable output")
    sync.set_defaults(func=_sync)

    tokens = commands.add_parser("tokens", help="token counts of each surface and meta-tool answer")
    tokens.add_argument("--spec", help="spec file (default: the bundled one)")
    tokens.add_argument("--json", action="store_true", help="machine-readable output")
    tokens.add_argument(
        "--tokenizer",
        choices=["cl100k", "o200k", "both"],
        default="both",
        help="count with cl100k_base, o200k_base or both (default both; budgets apply to cl100k)",
    )
    tokens.set_defaults(func=_tokens)

    eval_ = commands.add_parser(
        "eval", help="retrieval quality of TOOL_SEARCH on labelled queries (a report: exits 0 unless input is invalid)"
    )
    eval_.add_argument("queries", nargs="?", help="JSONL query file, e.g. eval/queries.jsonl (or use --catalogs)")
    eval_.add_argument(
        "--catalogs",
        nargs="?",
        const=DEFAULT_MANIFEST,
        metavar="MANIFEST",
        help=f"every catalog a manifest lists, the engine beside bm25, a row each (default {DEFAULT_MANIFEST})",
    )
    eval_.add_argument(
        "--baseline",
        choices=["bm25"],
        help="also run a baseline ranker and show it beside the engine (--catalogs always does)",
    )
    eval_.add_argument("--split", choices=["dev", "test", "all"], default="all", help="queries to use (default all)")
    eval_.add_argument("--json", action="store_true", help="machine-readable output")
    eval_.add_argument(
        "--markdown", action="store_true", help="with --catalogs: the README's table (a row per catalog, the means)"
    )
    eval_.add_argument("--spec", help="spec file (default: the bundled one)")
    eval_.add_argument("--vocabulary", metavar="FILE", help="a search vocabulary for the catalog (as for stdio)")
    eval_.add_argument(
        "--show-misses",
        type=int,
        default=0,
        metavar="N",
        help="list up to N positives without a grade-2 tool in the engine's top 5, and N negatives that got results "
        "(with --catalogs: per catalog, tuning splits only)",
    )
    eval_.add_argument(
        "--outcomes",
        action="store_true",
        help="with --catalogs --json: each query's outcome by id, no text (for bench/paired_eval.py)",
    )
    eval_.set_defaults(func=_eval, parser=eval_)

    from progressive_mcp.offline import sample_upstream

    sample = commands.add_parser(
        "sample-upstream",
        help="run the offline sample upstream (synthetic data)",
        description=sample_upstream.DESCRIPTION,
    )
    sample_upstream.add_arguments(sample)
    sample.add_argument(
        "--spec",
        metavar="FILE",
        help="serve the REST operations this file describes (synthetic answers from their output schemas) instead "
        "of the Alpha Vantage sample",
    )
    sample.set_defaults(func=_sample_upstream, parser=sample)
    return parser


def main(argv: list[str] | None = None) -> int:
    given = sys.argv[1:] if argv is None else argv
    if given[:1] == ["serve"] and not serve_available():  # not offered here, but say why rather than "invalid choice"
        print(SERVE_NEEDS_CHECKOUT, file=sys.stderr)
        return 2
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
