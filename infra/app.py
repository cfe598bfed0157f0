"""The CDK app: `cdk synth` / `cdk deploy` run it (see cdk.json), and so does `python -m infra.app` directly.

Run directly, it reads the defaults from cdk.json's "context" itself, takes `-c key=value` arguments like the
CDK CLI, writes the cloud assembly to cdk.out/ (no Node, no AWS account: the stack is environment-agnostic),
checks it against cdk-nag's AwsSolutions rules, and prints a short summary. Under the CDK CLI, the CLI passes
the context and the output directory.

Example::

    python -m infra.app -c auth_mode=passthrough -c endpoint=function-url -c reserved_concurrency=5
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aws_cdk import App
from cdk_nag import AwsSolutionsChecks

from infra.bundling import NEEDS_INDEX
from infra.config import StackConfig
from infra.stack import ProgressiveMcpStack

ROOT = Path(__file__).resolve().parent.parent
UNDER_CDK_CLI = "CDK_OUTDIR"  # the CLI sets it (with the context) when it runs the app


def parse_context_args(argv: Sequence[str]) -> dict[str, str]:
    """`-c key=value` / `--context key=value` pairs, as the CDK CLI takes them."""
    context: dict[str, str] = {}
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg in ("-c", "--context"):
            if not args:
                raise SystemExit(f"{arg} needs key=value")
            pair = args.pop(0)
        elif arg.startswith("--context="):
            pair = arg.partition("=")[2]
        else:
            raise SystemExit(f"unexpected argument {arg!r} (usage: python -m infra.app [-c key=value ...])")
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"context must be key=value, not {pair!r}")
        context[key] = value
    return context


def cdk_json_context(root: Path = ROOT) -> dict[str, Any]:
    return dict(json.loads((root / "cdk.json").read_text(encoding="utf-8")).get("context", {}))


def build_app(argv: Sequence[str] = ()) -> tuple[App, ProgressiveMcpStack]:
    """The app and its one stack, with context from cdk.json (or the CLI), then `argv`'s `-c` pairs."""
    if os.environ.get(UNDER_CDK_CLI):
        app = App(post_cli_context=parse_context_args(argv))
    else:
        app = App(
            context=cdk_json_context(),
            post_cli_context=parse_context_args(argv),
            outdir=str(ROOT / "cdk.out"),
        )
    try:
        config = StackConfig.from_context(app.node)
    except ValueError as exc:
        raise SystemExit(f"infra: {exc}") from None
    stack = ProgressiveMcpStack(app, config, root=ROOT)
    return app, stack


def nag_findings(stack: ProgressiveMcpStack) -> list[str]:
    """Unacknowledged cdk-nag AwsSolutions findings, one line each ("rule at path: description")."""
    report = AwsSolutionsChecks().validate_scope(stack)
    return [
        f"{violation.rule_name} ({violation.severity}) at {resource.construct_path}: {violation.description}"
        for violation in report.violations
        for resource in violation.violating_resources
    ]


def main(argv: Sequence[str] | None = None) -> int:
    try:  # the asset is bundled while the stack is built
        app, stack = build_app(sys.argv[1:] if argv is None else argv)
        assembly = app.synth()
    except Exception as exc:  # the bundler runs inside jsii: its error comes back wrapped in a long trace
        if NEEDS_INDEX not in str(exc):
            raise
        line = next(line for line in str(exc).splitlines() if NEEDS_INDEX in line)
        print(f"infra: {line[line.index(NEEDS_INDEX) :]}", file=sys.stderr)
        return 1
    # After synth, so that the rules see the finished tree (policies, lazy values); a finding fails the command.
    findings = nag_findings(stack)
    if findings:
        print("cdk-nag AwsSolutions findings (fix, or acknowledge with a reason in infra/stack.py):", file=sys.stderr)
        for line in findings:
            print(f"  {line}", file=sys.stderr)
        return 1
    if not os.environ.get(UNDER_CDK_CLI):
        artifact = assembly.get_stack_artifact(stack.artifact_id)
        template_path = Path(assembly.directory) / artifact.template_file
        resources = Counter(r["Type"] for r in artifact.template.get("Resources", {}).values())
        print(f"{stack.stack_name}: {sum(resources.values())} resources, template {template_path}")
        for kind, count in sorted(resources.items()):
            print(f"  {count:3d}  {kind}")
        print(f"  cdk-nag AwsSolutions: no unacknowledged findings ({len(stack.acknowledgements)} acknowledged)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
