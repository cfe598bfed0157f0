"""Write stripe.json, twilio.json and slack.json: the wire cases, expected side from reference.py.

Hand-written cases aim at one rule each (deepObject bodies, arrays, multipart, percent-encoding); the rest are
sample arguments made from each tool's input schema (what TOOL_GET shows an agent) so that every document gets
more than 45 operations. The expected request always comes from reference.py and the document, never from the
project's serializer. Run: `python tests/data/openapi_wire/make_cases.py` (needs ../shared/openapi).
"""

from __future__ import annotations

import base64
import json
import re
import sys
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

import check_cases
import reference

HERE = Path(__file__).resolve().parent
ACCOUNT = "AC" + "0123456789abcdef" * 2
TEXTS = ["hello world", "a,b&c=d", "Zoë 東京", "50% off [x]", "plain_text-1.0~", "x+y/z?q#f"]
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x01\xff").decode()
PDF_TEXT = b"%PDF-1.4\n% tiny \xe2\x9c\x93\n"

STRIPE_RULE_FORM = (
    "OpenAPI 3.x Encoding Object for application/x-www-form-urlencoded: each property serialised like a query "
    "parameter with its encoding entry's style/explode (wire_rules Bodies; deepObject line)"
)

# (tool, arguments, rule, aliases, files)
STRIPE: list[tuple[str, dict[str, Any], str, dict[str, str], frozenset[str]]] = [
    (
        "PostRefunds",
        {"charge": "ch_123", "amount": 500, "metadata": {"order": "42"}, "expand": ["charge"]},
        "issue 28's exact case: encoding deepObject for metadata and expand gives metadata[order]=42 and "
        "expand[]=charge; amount a number as JSON writes it (wire_rules General, deepObject)",
        {},
        frozenset(),
    ),
    (
        "PostRefunds",
        {"payment_intent": "pi_1", "reason": "duplicate", "refund_application_fee": True, "reverse_transfer": False},
        "booleans as true/false in a form body; properties without an encoding entry use form/explode true",
        {},
        frozenset(),
    ),
    (
        "PostRefunds",
        {"charge": "ch_2", "metadata": ""},
        "Stripe's anyOf [object, enum ['']]: a scalar under deepObject is name=value (metadata= unsets); "
        "wire_rules is silent on a scalar under deepObject, this follows the form scalar line",
        {},
        frozenset(),
    ),
    (
        "PostCustomers",
        {
            "name": "Zoë Dupont & Co",
            "email": "zoe+test@example.com",
            "address": {"line1": "1 Rue de la Paix", "city": "Paris", "postal_code": "75002", "country": "FR"},
            "metadata": {"order id": "A=1&B=2", "note": "x,y [z]"},
        },
        "deepObject nested object address[line1]=...; member names and values percent-encoded (space %20, "
        "'=' %3D, '&' %26, ',' %2C, '[' %5B), non-ASCII as UTF-8 bytes; the brackets the style adds literal",
        {},
        frozenset(),
    ),
    (
        "PostCustomers",
        {
            "description": "VIP",
            "invoice_settings": {
                "custom_fields": [{"name": "PO", "value": "123"}, {"name": "Ref", "value": "a b"}],
                "footer": "Thanks!",
            },
            "expand": ["tax", "invoice_settings.default_payment_method"],
        },
        "deepObject: an array of objects inside an object is indexed from 0 "
        "(invoice_settings[custom_fields][0][name]=PO); expand[] repeated in argument order",
        {},
        frozenset(),
    ),
    (
        "PostPaymentMethods",
        {"type": "card", "card": {"number": "4242424242424242", "exp_month": 12, "exp_year": 2030, "cvc": "123"}},
        "deepObject nested card[exp_month]=12 (integers as JSON writes them)",
        {},
        frozenset(),
    ),
    (
        "PostPaymentMethods",
        {
            "type": "card",
            "card": {"token": "tok_visa"},
            "billing_details": {"name": "Jean Müller", "address": {"city": "Zürich", "country": "CH"}},
        },
        "deepObject two levels deep: billing_details[address][city]=Z%C3%BCrich",
        {},
        frozenset(),
    ),
    (
        "PostCheckoutSessions",
        {
            "mode": "payment",
            "success_url": "https://example.com/ok?session={CHECKOUT_SESSION_ID}",
            "cancel_url": "https://example.com/cancel",
            "line_items": [{"price": "price_1", "quantity": 2}, {"price": "price_2", "quantity": 1}],
        },
        "deepObject: an array of objects at top level indexed from 0: line_items[0][price]=price_1&"
        "line_items[0][quantity]=2; a URL value percent-encoded (':' '/' '?' '=' '{' '}')",
        {},
        frozenset(),
    ),
    (
        "PostCheckoutSessions",
        {
            "mode": "subscription",
            "success_url": "https://example.com/ok",
            "cancel_url": "https://example.com/no",
            "line_items": [{"price_data": {"currency": "eur", "product": "prod_1", "unit_amount": 999}, "quantity": 3}],
            "payment_method_types": ["card", "sepa_debit"],
            "metadata": {"campaign": "spring"},
        },
        "deepObject: object inside an indexed array (line_items[0][price_data][currency]=eur); array of "
        "scalars payment_method_types[]=card",
        {},
        frozenset(),
    ),
    (
        "PostPrices",
        {
            "currency": "usd",
            "unit_amount": 1500,
            "product_data": {"name": "Gold plan", "metadata": {"tier": "gold"}},
            "recurring": {"interval": "month", "interval_count": 1},
        },
        "deepObject nested object inside object: product_data[metadata][tier]=gold",
        {},
        frozenset(),
    ),
    (
        "PostPrices",
        {
            "currency": "usd",
            "product": "prod_9",
            "billing_scheme": "tiered",
            "tiers_mode": "graduated",
            "recurring": {"interval": "month"},
            "tiers": [{"up_to": 10, "unit_amount": 100}, {"up_to": "inf", "unit_amount": 80}],
        },
        "deepObject: array of objects indexed; anyOf [enum inf, integer] members as text (tiers[1][up_to]=inf)",
        {},
        frozenset(),
    ),
    (
        "PostProducts",
        {
            "name": "Café crème",
            "images": ["https://example.com/a.png", "https://example.com/b c.png"],
            "package_dimensions": {"height": 1.5, "length": 2, "weight": 0.25, "width": 10},
            "shippable": True,
        },
        "deepObject numbers as JSON writes them (1.5, 0.25); images[] array of scalars; non-ASCII name",
        {},
        frozenset(),
    ),
    (
        "PostSubscriptions",
        {"customer": "cus_1", "items": [{"price": "price_1", "quantity": 2}], "cancel_at_period_end": False},
        "deepObject items[0][price]=price_1; boolean false",
        {},
        frozenset(),
    ),
    (
        "PostCoupons",
        {
            "percent_off": 12.5,
            "duration": "repeating",
            "duration_in_months": 3,
            "applies_to": {"products": ["p1", "p2"]},
        },
        "deepObject array of scalars inside object: applies_to[products][]=p1; a float 12.5",
        {},
        frozenset(),
    ),
    (
        "GetCharges",
        {"created": {"gte": 1700000000, "lt": 1800000000}, "expand": ["data.customer"], "limit": 3},
        "query parameter style deepObject explode true: created[gte]=1700000000; expand[]=data.customer; "
        "limit style form",
        {},
        frozenset(),
    ),
    (
        "GetCustomers",
        {"email": "a b+c@example.com", "created": 1700000000},
        "query form scalar percent-encoded (space %20 not +, '+' %2B, '@' %40); a scalar given to a deepObject "
        "parameter (anyOf object|integer) is created=1700000000 (wire_rules silent: treated like a form scalar)",
        {},
        frozenset(),
    ),
    (
        "GetInvoices",
        {
            "customer": "cus_1",
            "status": "open",
            "due_date": {"lte": 1700000000},
            "expand": ["data.subscription", "data.customer"],
        },
        "query deepObject due_date[lte]; expand[] twice in argument order",
        {},
        frozenset(),
    ),
    (
        "GetCustomersCustomer",
        {"customer": "cus a/b?c#d%é", "expand": ["default_source"]},
        "path style simple: every reserved byte percent-encoded (' ' %20, '/' %2F, '?' %3F, '#' %23, '%' %25, "
        "non-ASCII UTF-8); expand[] in the query",
        {},
        frozenset(),
    ),
    (
        "DeleteCustomersCustomer",
        {"customer": "cus_123"},
        "DELETE with only a path parameter: no body, no Content-Type (wire_rules General)",
        {},
        frozenset(),
    ),
    (
        "GetChargesCharge",
        {"charge": "ch_1,2;3=4"},
        "path simple: ',' ';' '=' inside a value are percent-encoded; no body on a GET",
        {},
        frozenset(),
    ),
    (
        "GetProductsSearch",
        {"query": "active:'true' AND metadata['order_id']:'6735'", "limit": 10},
        "query form scalar with quotes, colon, brackets and spaces percent-encoded",
        {},
        frozenset(),
    ),
    (
        "PostCustomersCustomerSources",
        {"customer": "cus_1", "source": "tok_1", "metadata": {"k": "v"}},
        "path parameter plus form body: the body carries only body properties; deepObject metadata",
        {},
        frozenset(),
    ),
    (
        "PostFiles",
        {"file": PNG, "purpose": "dispute_evidence"},
        "multipart/form-data: Stripe's 2022 snapshot declares `file` as type string without format binary, so "
        "by wire_rules it is a text/plain part holding the string as given (the lead's decision; a document that "
        "marks the file as binary gets a file part, see lead_smoke.json); purpose a text/plain part",
        {},
        frozenset(),
    ),
    (
        "PostFiles",
        {"file": "data:application/pdf;base64," + base64.b64encode(PDF_TEXT).decode(), "purpose": "identity_document"},
        "multipart/form-data: a data URL given for a property declared as a plain string (Stripe's `file`) is a "
        "file part of the URL's type (application/pdf) and its decoded bytes (the lead's amendment to wire_rules)",
        {},
        frozenset(),
    ),
    (
        "PostFiles",
        {
            "file": base64.b64encode(b"col1,col2\n1,2\n").decode(),
            "purpose": "tax_document_user_upload",
            "file_link_data": {"create": True, "expires_at": 1900000000},
        },
        "multipart/form-data with an Encoding Object that sets style deepObject, explode true for file_link_data: "
        "OpenAPI 3.1.1/3.2 apply style/explode to multipart too and ignore contentType then, so one text/plain part "
        "per deepObject pair, named file_link_data[create] and file_link_data[expires_at] (issue 28 item 2), not "
        "one JSON part",
        {},
        frozenset(),
    ),
    (
        "PostFiles",
        {
            "file": "data:text/csv;base64," + base64.b64encode(b"a,b\n").decode(),
            "purpose": "dispute_evidence",
            "expand": ["links", "links.data"],
            "file_link_data": {"create": True, "metadata": {"order": "42", "note": "Zoë & co"}},
        },
        "multipart/form-data, style deepObject on an array of scalars (expand[] parts, one per item) and on a "
        "nested object (file_link_data[metadata][order]); a part's text is the value itself, not percent-encoded",
        {},
        frozenset(),
    ),
]

TWILIO: list[tuple[str, dict[str, Any], str, dict[str, str], frozenset[str]]] = [
    (
        "CreateMessage",
        {
            "AccountSid": ACCOUNT,
            "To": "+15551230000",
            "From": "+15559870000",
            "Body": "Hello 👋 & welcome, a=b",
            "MediaUrl": ["https://example.com/a.jpg", "https://example.com/b.jpg?x=1&y=2"],
        },
        "form body, no Encoding Object: array property form/explode true repeats MediaUrl=...; '+' %2B, emoji as "
        "UTF-8 bytes, '&' '=' ',' in values percent-encoded",
        {},
        frozenset(),
    ),
    (
        "CreateMessage",
        {
            "AccountSid": ACCOUNT,
            "To": "whatsapp:+15551230000",
            "MessagingServiceSid": "MG" + "a" * 32,
            "Body": "hi",
            "SmartEncoded": True,
            "ValidityPeriod": 600,
        },
        "optional members left out send nothing; boolean true, integer 600",
        {},
        frozenset(),
    ),
    (
        "CreateCall",
        {
            "AccountSid": ACCOUNT,
            "To": "+15551230000",
            "From": "+15559870000",
            "Url": "https://example.com/twiml?x=1",
            "StatusCallbackEvent": ["initiated", "ringing", "answered", "completed"],
            "StatusCallbackMethod": "POST",
        },
        "form body array StatusCallbackEvent repeated in argument order (form, explode true)",
        {},
        frozenset(),
    ),
    (
        "ListCall",
        {
            "AccountSid": ACCOUNT,
            "Status": "completed",
            "StartTime_query": "2024-01-31T00:00:00Z",
            "StartTime_query_query2": "2024-01-01T00:00:00Z",
            "PageSize": 20,
        },
        "query parameters named 'StartTime<' and 'StartTime>' (arguments StartTime_query and "
        "StartTime_query_query2 as TOOL_GET shows them): names percent-encoded like values (%3C, %3E), ':' %3A",
        {"StartTime_query": "StartTime<", "StartTime_query_query2": "StartTime>"},
        frozenset(),
    ),
    (
        "ListMessage",
        {"AccountSid": ACCOUNT, "To": "+15551230000", "DateSent": "2024-02-03T04:05:06Z", "PageSize": 50},
        "GET with query filters: form scalars; no body, no Content-Type",
        {},
        frozenset(),
    ),
    (
        "FetchMessage",
        {"AccountSid": ACCOUNT, "Sid": "SM" + "0123456789abcdef" * 2},
        "path parameters AccountSid and Sid, style simple; '.json' suffix kept",
        {},
        frozenset(),
    ),
    (
        "DeleteMessage",
        {"AccountSid": ACCOUNT, "Sid": "MM" + "fedcba9876543210" * 2},
        "DELETE: path parameters only, no body, no Content-Type",
        {},
        frozenset(),
    ),
    (
        "UpdateMessage",
        {"AccountSid": ACCOUNT, "Sid": "SM" + "1" * 32, "Body": ""},
        "an empty string is a value: Body= (form scalar)",
        {},
        frozenset(),
    ),
    (
        "CreateParticipant",
        {
            "AccountSid": ACCOUNT,
            "ConferenceSid": "CF" + "2" * 32,
            "From": "+15559870000",
            "To": "client:alice",
            "StatusCallbackEvent": ["ringing", "answered"],
            "ConferenceStatusCallbackEvent": ["start", "end", "join"],
            "Muted": False,
            "Timeout": 30,
        },
        "two array properties each repeated; boolean false; integer",
        {},
        frozenset(),
    ),
    (
        "UpdateConnectApp",
        {
            "AccountSid": ACCOUNT,
            "Sid": "CN" + "3" * 32,
            "Permissions": ["get-all", "post-all"],
            "FriendlyName": "My app",
        },
        "array of $ref enum items repeated (Permissions=get-all&Permissions=post-all); space %20",
        {},
        frozenset(),
    ),
    (
        "CreateIncomingPhoneNumber",
        {
            "AccountSid": ACCOUNT,
            "PhoneNumber": "+15551112222",
            "FriendlyName": "Main line #1",
            "VoiceReceiveMode": "voice",
        },
        "a $ref enum property sent as its text; '#' %23",
        {},
        frozenset(),
    ),
    (
        "ListAvailablePhoneNumberLocal",
        {"AccountSid": ACCOUNT, "CountryCode": "US", "AreaCode": 415, "Contains": "5**", "SmsEnabled": True},
        "query integers and booleans as JSON writes them; '*' %2A",
        {},
        frozenset(),
    ),
]

SLACK: list[tuple[str, dict[str, Any], str, dict[str, str], frozenset[str]]] = [
    (
        "chat_postMessage",
        {"channel": "C123", "text": "Hello *world* & <@U1|bob>, 100% ✓", "mrkdwn": True, "unfurl_links": False},
        "Swagger 2.0 in: formData parameters make an application/x-www-form-urlencoded body; every reserved "
        "byte percent-encoded; booleans true/false",
        {},
        frozenset(),
    ),
    (
        "chat_postMessage",
        {"channel": "#general", "blocks": '[{"type":"section","text":{"type":"mrkdwn","text":"hi"}}]'},
        "a string holding JSON is sent as its text, percent-encoded ('[' %5B, '{' %7B, '\"' %22, ':' %3A)",
        {},
        frozenset(),
    ),
    (
        "conversations_history",
        {"channel": "C123", "limit": 20, "inclusive": True, "oldest": 1700000000.5},
        "Swagger 2.0 query parameters: integer, boolean, number as JSON writes them; GET without body",
        {},
        frozenset(),
    ),
    (
        "files_upload",
        {"content": "line one\nline two", "filename": "notes.txt", "channels": "C1,C2", "title": "Notes"},
        "files.upload consumes only application/x-www-form-urlencoded and has no type: file parameter, so a "
        "form body (wire_rules Swagger 2.0 line); '\\n' %0A, the ',' in a value %2C (no collectionFormat: a string)",
        {},
        frozenset(),
    ),
    (
        "users_list",
        {"cursor": "dXNlcjpVMDYxTkZUVDI=", "limit": 100, "include_locale": True},
        "query form: '=' in a value %3D",
        {},
        frozenset(),
    ),
    (
        "search_messages",
        {"query": 'from:@bob in:#general "exact phrase"', "count": 5, "highlight": True, "sort": "timestamp"},
        "query values with quotes, '@', '#', ':' and spaces percent-encoded",
        {},
        frozenset(),
    ),
]


def fake_sid(pattern: str) -> str:
    match = re.fullmatch(r"\^\(?(\w\w)(?:\|\w\w)*\)?\[0-9a-fA-F\]\{32\}\$", pattern)
    if not match:
        raise ValueError(pattern)
    return match.group(1) + "0123456789abcdef" * 2


def sample(schema: dict[str, Any], index: int, depth: int = 0) -> Any:
    """A schema-valid sample value (None when this generator cannot make one)."""
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [o for o in schema[key] if o.get("enum") != [""]]
            for option in options:
                value = sample(option, index, depth)
                if value is not None:
                    return value
            return None
    if "enum" in schema:
        values = [v for v in schema["enum"] if v != ""]
        return values[index % len(values)] if values else None
    kind = schema.get("type")
    if kind == "string":
        if "pattern" in schema:
            return fake_sid(schema["pattern"])
        fmt = schema.get("format")
        text = {
            "uri": "https://example.com/hook?a=1&b=two words",
            "phone-number": "+15551234567",
            "date-time": "2024-05-06T07:08:09Z",
            "date": "2024-05-06",
            "http-method": "POST",
            "decimal": "12.5",
            "iso-country-code": "US",
        }.get(fmt or "", TEXTS[index % len(TEXTS)])
        return text[: schema.get("maxLength", 5000)]
    if kind == "integer":
        low = schema.get("minimum", 0)
        return min(max(low, 7 + index), schema.get("maximum", 10**9))
    if kind == "number":
        return 2.5
    if kind == "boolean":
        return index % 2 == 0
    if kind == "array":
        if depth > 3:
            return None
        items = schema.get("items", {})
        first, second = sample(items, index, depth + 1), sample(items, index + 1, depth + 1)
        return [v for v in (first, second) if v is not None] or None
    if kind == "object" or "properties" in schema:
        if depth > 3:
            return None
        props = schema.get("properties", {})
        if not props:
            return {"order": "42", "note": "a b&c=d"}
        out = {}
        for name in schema.get("required", []):
            value = sample(props[name], index, depth + 1)
            if value is None:
                return None
            out[name] = value
        for name, prop in props.items():
            if len(out) >= len(schema.get("required", [])) + 1:
                break
            if name not in out:
                value = sample(prop, index, depth + 1)
                if value is not None:
                    out[name] = value
        return out
    return None


def auto_arguments(schema: dict[str, Any], seed: int, optional: int = 4) -> dict[str, Any] | None:
    props = schema.get("properties", {})
    args: dict[str, Any] = {}
    for name in schema.get("required", []):
        value = sample(props[name], seed)
        if value is None:
            return None
        args[name] = value
    added = 0
    for offset, (name, prop) in enumerate(props.items()):
        if added >= optional:
            break
        if name in args or "_query" in name or "_body" in name or "_path" in name:
            continue
        value = sample(prop, seed + offset)
        if value is not None:
            args[name] = value
            added += 1
    return args


def rule_for(document: dict[str, Any], tool: str, expect: dict[str, Any]) -> str:
    method, template, _, _ = reference.find_operation(document, tool)
    swagger = "swagger" in document
    parts = [f"{method} {template}: path style simple percent-encoded" if "{" in template else f"{method} {template}"]
    if expect["query"]:
        if swagger:
            parts.append("Swagger 2.0 query parameters: name=value (collectionFormat csv by default)")
        elif "[" in expect["query"]:
            parts.append("query style deepObject where the document says so (x[k]=v, x[]=v), else form explode true")
        else:
            parts.append("query style form, explode true (the Parameter Object defaults)")
    if expect.get("body") is not None:
        if swagger:
            parts.append("Swagger 2.0 in: formData parameters make an application/x-www-form-urlencoded body")
        else:
            parts.append("form body: each property like a query parameter with its Encoding entry (default form)")
    if expect["content_type"] is None:
        parts.append("no body, so no Content-Type")
    parts.append("wire_rules General: values as text, unreserved bytes kept, others %XX upper-case")
    return "; ".join(parts)


def build(name: str, document_path: str, hand: list, auto_count: int) -> list[dict[str, Any]]:
    document = json.loads((check_cases.SHARED / document_path).read_text(encoding="utf-8"))
    cases: list[dict[str, Any]] = []
    for tool, arguments, rule, aliases, files in hand:
        expect = reference.expected_request(document, tool, arguments, aliases, files)
        cases.append({"document": document_path, "tool": tool, "arguments": arguments, "expect": expect, "rule": rule})
    handled = {case["tool"] for case in cases}
    ids = [
        operation["operationId"]
        for item in document["paths"].values()
        for method, operation in item.items()
        if method in reference.HTTP_METHODS and isinstance(operation, dict) and "operationId" in operation
    ]
    schemas = anyio.run(check_cases.input_schemas, check_cases.SHARED / document_path, ids)
    # Every k-th operation, so the sample spreads over the whole document (GET, POST, DELETE alike).
    step = max(1, len(ids) // (auto_count + 10))
    for seed, tool in enumerate(ids[::step]):
        if len(cases) >= len(hand) + auto_count:
            break
        if tool in handled or tool not in schemas:
            continue
        arguments = auto_arguments(schemas[tool], seed)
        if arguments is None:
            continue
        expect = reference.expected_request(document, tool, arguments)
        rule = "sample arguments from the tool's input schema; " + rule_for(document, tool, expect)
        cases.append({"document": document_path, "tool": tool, "arguments": arguments, "expect": expect, "rule": rule})
    (HERE / f"{name}.json").write_text(json.dumps(cases, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return cases


def main() -> int:
    for name, path, hand in (
        ("stripe", "stripe/spec3.json", STRIPE),
        ("twilio", "twilio/twilio_api_v2010.json", TWILIO),
        ("slack", "slack/swagger.json", SLACK),
    ):
        cases = build(name, path, hand, 52 - len(hand))
        print(name, len(cases))
    return 0


if __name__ == "__main__":
    sys.exit(main())
