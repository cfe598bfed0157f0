"""`python -m stdio_server [flags]`: parses the server flags of `progressive-mcp stdio` and runs that server.

Example::

    python -m stdio_server --spec spec/alphavantage.yaml --mode hybrid --categories stocks,forex
"""

from __future__ import annotations

import argparse

from progressive_mcp.cli import add_policy_flag, add_server_flags
from progressive_mcp.surfaces.stdio import build_server, run, serve

__all__ = ["build_server", "main", "parse_args", "serve"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m stdio_server", description="progressive-mcp over stdio")
    add_server_flags(parser)
    add_policy_flag(parser)
    return parser


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    return run(parse_args(argv))
