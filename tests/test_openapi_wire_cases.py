"""The wire cases (tests/data/openapi_wire/*.json) hold arguments an agent could really send, and their expected
side agrees with the reference encoder written from the OpenAPI specification.

The arguments are checked against each tool's input schema as TOOL_GET shows it, through the real
`progressive-mcp stdio` under the official `mcp` SDK client (check_cases.py). Skipped when ../shared/openapi is
absent. Running the cases against the serializer is another test's job.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import pytest

WIRE = Path(__file__).resolve().parent / "data" / "openapi_wire"
sys.path.insert(0, str(WIRE))

import check_cases  # noqa: E402
import reference  # noqa: E402

pytestmark = pytest.mark.skipif(not check_cases.SHARED.is_dir(), reason="../shared/openapi is absent")


@pytest.mark.slow
def test_every_case_is_valid_for_its_tool_input_schema() -> None:
    cases = check_cases.load_cases()
    assert check_cases.check(cases) == []


@pytest.mark.slow
def test_check_reports_arguments_the_schema_refuses() -> None:
    refund = {"document": "stripe/spec3.json", "tool": "PostRefunds", "rule": "r"}
    refund["expect"] = {"method": "POST", "path": "/v1/refunds", "query": "", "content_type": None, "body": None}
    bad = [
        dict(refund, arguments={"amount": "five hundred"}),
        dict(refund, arguments={"charge": "ch_1", "nope": 1}),
        dict(refund, tool="NoSuchTool", arguments={}),
    ]
    problems = check_cases.check(bad)
    assert len(problems) == 3, problems
    assert "amount" in problems[0] and "nope" in problems[1] and "no such tool" in problems[2]


@pytest.mark.parametrize("name", check_cases.CASE_FILES)
def test_each_document_has_45_operations_and_expectations_from_the_reference(name: str) -> None:
    cases = check_cases.load_cases([name])
    assert len(cases) >= 45
    document = json.loads((check_cases.SHARED / cases[0]["document"]).read_text(encoding="utf-8"))
    for case in cases:
        assert check_cases.shape_problems(case) == []
        files: frozenset[str] = frozenset()  # no property is sent as a file unless the rules say so
        # The clash names TOOL_GET shows for Twilio's `StartTime<` / `StartTime>` (ListCall) map back to them.
        aliases = {
            k: k.replace("_query_query2", ">").replace("_query", "<") for k in case["arguments"] if "_query" in k
        }
        assert reference.expected_request(document, case["tool"], case["arguments"], aliases, files) == case["expect"]


def test_the_issue_case_and_a_multipart_upload_are_present() -> None:
    stripe = check_cases.load_cases(["stripe.json"])
    refund = next(c for c in stripe if c["tool"] == "PostRefunds")
    assert refund["arguments"] == {"charge": "ch_123", "amount": 500, "metadata": {"order": "42"}, "expand": ["charge"]}
    pieces = refund["expect"]["body"].split("&")
    assert {"charge=ch_123", "amount=500", "metadata[order]=42", "expand[]=charge"} == set(pieces)
    # Stripe's 2022 document declares `file` as a plain string: given as a data URL it is a file part.
    upload = next(c for c in stripe if c["tool"] == "PostFiles" and c["arguments"]["file"].startswith("data:"))
    parts = {p["name"]: p for p in upload["expect"]["multipart"]}
    assert parts["file"]["filename"] is True
    assert parts["file"]["content_type"] == "application/pdf"
    data = upload["arguments"]["file"].partition(",")[2]
    assert base64.b64decode(parts["file"]["body_base64"]) == base64.b64decode(data)
    assert base64.b64decode(parts["purpose"]["body_base64"]).decode() == upload["arguments"]["purpose"]


def test_reference_encoder_follows_the_specification_style_examples() -> None:
    # The Style Examples table of the OpenAPI Specification (3.0.3), parameter `color`.
    array, obj = ["blue", "black", "brown"], {"R": 100, "G": 200, "B": 150}
    assert reference.query_pieces("color", array, "form", True) == ["color=blue", "color=black", "color=brown"]
    assert reference.query_pieces("color", array, "form", False) == ["color=blue,black,brown"]
    assert reference.query_pieces("color", obj, "form", True) == ["R=100", "G=200", "B=150"]
    assert reference.query_pieces("color", obj, "form", False) == ["color=R,100,G,200,B,150"]
    assert reference.query_pieces("color", array, "spaceDelimited", False) == ["color=blue%20black%20brown"]
    assert reference.query_pieces("color", array, "pipeDelimited", False) == ["color=blue|black|brown"]
    assert reference.query_pieces("color", obj, "deepObject", True) == ["color[R]=100", "color[G]=200", "color[B]=150"]
    assert reference.path_text("color", array, "simple", False) == "blue,black,brown"
    assert reference.path_text("color", obj, "simple", False) == "R,100,G,200,B,150"
    assert reference.path_text("color", obj, "simple", True) == "R=100,G=200,B=150"
    assert reference.path_text("color", array, "label", False) == ".blue,black,brown"
    assert reference.path_text("color", array, "label", True) == ".blue.black.brown"
    assert reference.path_text("color", array, "matrix", False) == ";color=blue,black,brown"
    assert reference.path_text("color", array, "matrix", True) == ";color=blue;color=black;color=brown"
    assert reference.path_text("color", obj, "matrix", True) == ";R=100;G=200;B=150"
    assert reference.swagger_pieces("id", ["a b", "c"], "ssv") == ["id=a%20b%20c"]
    assert reference.swagger_pieces("id", ["a", "b"], "multi") == ["id=a", "id=b"]
    assert reference.pct("a b,[é]~") == "a%20b%2C%5B%C3%A9%5D~"
