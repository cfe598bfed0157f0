"""A large synthetic spec for scale benchmarks: the real Alpha Vantage tools plus many companies × a few tools each.

ScaleMCP-style (one small server per company, thousands of them): each invented company gets the same kinds of
tools (`<TICKER>_STOCK_PRICE`, `<TICKER>_EARNINGS`, `<TICKER>_NEWS`, ...), written from templates with a summary,
description, keywords, example questions and parameters, so a search index sees what a real catalog of that size
would hold: many near-identical documents told apart by company names and tickers. Companies are invented from a
seeded random generator (no network, same output for the same seed); the 128 real tools come first, unchanged.

    spec = synthetic_spec(5000)                  # a dict in the spec format (spec/spec.schema.json)
    catalog = synthetic_catalog(5000)            # the same, validated by progressive_mcp.sources.spec, as a Catalog

Or write one for the server: `.venv/bin/python bench/synthetic_spec.py 5000 -o /tmp/spec5000.json`, then
`PMCP_SPEC=/tmp/spec5000.json .venv/bin/progressive-mcp serve`.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import random
import re
import string
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from progressive_mcp.catalog import Catalog  # noqa: E402
from progressive_mcp.sources.spec import build_catalog, parse_spec  # noqa: E402

REAL_SPEC = ROOT / "spec" / "alphavantage.yaml"

# Invented company names: a made-up stem ("Coranova"), an industry word and a corporate suffix.
# Spaced words, split where used (three long literal lists would each take a screen once formatted).
_STEM_STARTS = "Al Bel Cor Dra El Fen Gal Hal Ir Jun Kel Lum Mar Nor Or Pel Quin Ros Sol Tam Ul Ver Wes Xan Yor Zen"
_STEM_MIDDLES = "a e i o u an en ar or il ex"
_STEM_ENDS = "tra vex dian nova gen lith tek mont ford ris wick ton via cor stone field"
_CORPORATE = ("Inc.", "Corp.", "Holdings", "Group", "plc", "Ltd.")


@dataclass(frozen=True, slots=True)
class Sector:
    industry: str  # the word in the company's name
    label: str  # how the description names the business
    keywords: tuple[str, ...]  # how people search for it


SECTORS = (
    Sector("Semiconductor", "semiconductors", ("chips", "chipmaker")),
    Sector("Therapeutics", "biotechnology", ("biotech", "drug developer")),
    Sector("Energy", "oil and gas production", ("oil producer", "energy")),
    Sector("Bancorp", "regional banking", ("bank", "lender")),
    Sector("Logistics", "freight and logistics", ("shipping", "trucking")),
    Sector("Software", "enterprise software", ("saas", "cloud software")),
    Sector("Motors", "automobiles", ("automaker", "electric vehicles")),
    Sector("Retail", "consumer retail", ("retailer", "stores")),
    Sector("Foods", "packaged foods", ("food company", "consumer staples")),
    Sector("Airlines", "air travel", ("airline", "travel")),
    Sector("Mining", "metals and mining", ("miner", "copper")),
    Sector("Pharmaceuticals", "pharmaceuticals", ("pharma", "drugmaker")),
    Sector("Networks", "telecommunications", ("telecom", "wireless carrier")),
    Sector("Realty", "real estate investment", ("reit", "property")),
    Sector("Insurance", "property and casualty insurance", ("insurer", "underwriting")),
    Sector("Aerospace", "aerospace and defense", ("defense contractor", "aircraft")),
    Sector("Utilities", "electric utilities", ("utility", "power company")),
    Sector("Media", "media and entertainment", ("streaming", "studio")),
    Sector("Robotics", "industrial automation", ("robots", "automation")),
    Sector("Solar", "renewable energy", ("solar", "clean energy")),
)


@dataclass(frozen=True, slots=True)
class Company:
    name: str  # "Coranova Semiconductor Corp."
    short: str  # "Coranova", what people type
    ticker: str  # "CRNV"
    sector: Sector

    def fill(self, text: str) -> str:
        return text.format(
            name=self.name,
            short=self.short,
            ticker=self.ticker,
            sector=self.sector.label,
            kind=self.sector.keywords[0],
        )


@dataclass(frozen=True, slots=True)
class ToolTemplate:
    suffix: str  # tool name is <TICKER>_<suffix>
    category: str  # one of the real spec's categories
    title: str
    summary: str
    description: str
    keywords: tuple[str, ...]
    examples: tuple[str, ...]  # each company gets 3 of these, picked by the seeded generator
    params: dict[str, dict[str, Any]]
    cache_ttl_s: int


_LIMIT = {"type": "integer", "minimum": 1, "maximum": 1000, "default": 50, "description": "Most items to return."}
_PERIOD = {"type": "string", "enum": ["quarterly", "annual"], "default": "quarterly", "description": "Report period."}
_DAY = {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"}

TEMPLATES: tuple[ToolTemplate, ...] = (
    ToolTemplate(
        "STOCK_PRICE",
        "stocks",
        "{short} share price",
        "Latest share price, change and volume for {name} ({ticker}).",
        "Use when someone asks what {name} ({ticker}, {sector}) trades at now: last price, change, "
        "percent change, volume and day range. For its price history use {ticker}_PRICE_HISTORY.",
        ("{ticker} quote", "{short} stock price", "share price", "trading at", "{kind}"),
        (
            "what is {short} trading at",
            "{ticker} share price right now",
            "how much is one share of {name}",
            "current quote for {ticker}",
            "did {short} stock go up today",
        ),
        {"datatype": {"use": "datatype"}, "entitlement": {"use": "entitlement"}},
        60,
    ),
    ToolTemplate(
        "PRICE_HISTORY",
        "stocks",
        "{short} price history",
        "Daily, weekly or monthly OHLCV bars for {name} ({ticker}).",
        "Use for the past prices of {name} ({ticker}): open, high, low, close and volume per day, week or month, "
        "from a start date. For the latest price alone use {ticker}_STOCK_PRICE.",
        ("{ticker} history", "{short} chart", "ohlcv", "closing prices", "candles"),
        (
            "{ticker} closing prices for the last 3 months",
            "weekly chart of {short} since 2020",
            "how did {name} stock do last year",
            "monthly candles for {ticker}",
        ),
        {
            "interval": {"type": "string", "enum": ["daily", "weekly", "monthly"], "default": "daily"},
            "start_date": {**_DAY, "description": "First day of the series; omit for the last 100 bars."},
            "outputsize": {"use": "outputsize"},
            "datatype": {"use": "datatype"},
        },
        3600,
    ),
    ToolTemplate(
        "EARNINGS",
        "fundamentals",
        "{short} earnings",
        "Quarterly and annual EPS of {name} ({ticker}), with estimates and surprises.",
        "Use for how much {name} ({ticker}) earned per share: reported EPS, the analysts' estimate and the surprise "
        "for each quarter or year. For revenue and the statements use {ticker}_FUNDAMENTALS.",
        ("{ticker} eps", "{short} earnings", "earnings per share", "earnings surprise", "quarterly results"),
        (
            "{ticker} earnings per share last quarter",
            "did {short} beat earnings estimates",
            "annual EPS history of {name}",
            "{short} quarterly results",
        ),
        {"period": _PERIOD, "limit": _LIMIT},
        86400,
    ),
    ToolTemplate(
        "FUNDAMENTALS",
        "fundamentals",
        "{short} financial statements",
        "Income statement, balance sheet and cash flow of {name} ({ticker}).",
        "Use for the accounts of {name} ({ticker}, {sector}): revenue, margins, assets, debt and free "
        "cash flow per quarter or year. For earnings per share alone use {ticker}_EARNINGS.",
        ("{ticker} financials", "{short} revenue", "balance sheet", "income statement", "cash flow", "{kind}"),
        (
            "{short} revenue growth over the last 5 years",
            "how much debt does {name} have",
            "{ticker} free cash flow",
            "balance sheet of {short}",
        ),
        {
            "statement": {
                "type": "string",
                "enum": ["income", "balance_sheet", "cash_flow"],
                "required": True,
                "description": "Which statement.",
            },
            "period": _PERIOD,
        },
        86400,
    ),
    ToolTemplate(
        "NEWS",
        "intelligence",
        "{short} news",
        "Recent news articles about {name} ({ticker}) with sentiment scores.",
        "Use for what is being said about {name} ({ticker}): headlines, sources, a sentiment score per article "
        "and overall, newest first. Narrow with time_from.",
        ("{ticker} news", "{short} headlines", "sentiment", "press coverage", "{kind}"),
        (
            "latest news about {name}",
            "why is {ticker} moving today",
            "is the sentiment on {short} positive",
            "{short} headlines this week",
        ),
        {
            "time_from": {"type": "string", "pattern": r"^\d{8}T\d{4}$", "description": "Earliest, YYYYMMDDTHHMM."},
            "sort": {"type": "string", "enum": ["LATEST", "EARLIEST", "RELEVANCE"], "default": "LATEST"},
            "limit": _LIMIT,
        },
        900,
    ),
    ToolTemplate(
        "DIVIDENDS",
        "fundamentals",
        "{short} dividends",
        "Dividend history of {name} ({ticker}): amounts, ex-dates and payment dates.",
        "Use for what {name} ({ticker}) pays its shareholders: each dividend's amount, ex-dividend, record and "
        "payment dates, and the trailing yield.",
        ("{ticker} dividend", "{short} payout", "dividend yield", "ex-dividend date", "income"),
        (
            "{short} dividend yield",
            "when is the next {ticker} ex-dividend date",
            "how much does {name} pay in dividends",
            "{ticker} dividend history",
        ),
        {"datatype": {"use": "datatype"}},
        86400,
    ),
    ToolTemplate(
        "INSIDER_TRADES",
        "intelligence",
        "{short} insider trades",
        "Share purchases and sales by officers and directors of {name} ({ticker}).",
        "Use for whether the people running {name} ({ticker}) buy or sell its stock: each Form 4 transaction with "
        "the insider's name, role, shares, price and date.",
        ("{ticker} insiders", "insider buying", "insider selling", "form 4", "executives"),
        (
            "are {short} executives selling stock",
            "insider purchases at {ticker} this year",
            "who sold {name} shares recently",
        ),
        {"start_date": {**_DAY, "description": "Only transactions on or after this day."}, "limit": _LIMIT},
        86400,
    ),
    ToolTemplate(
        "ANALYST_RATINGS",
        "intelligence",
        "{short} analyst ratings",
        "Analyst buy/hold/sell ratings and price targets for {name} ({ticker}).",
        "Use for what Wall Street thinks of {name} ({ticker}): the count of buy, hold and sell ratings, the "
        "average and range of price targets, and recent upgrades and downgrades.",
        ("{ticker} price target", "{short} rating", "upgrade", "downgrade", "consensus"),
        (
            "analyst price target for {ticker}",
            "is {short} a buy according to analysts",
            "recent downgrades of {name}",
            "{ticker} consensus rating",
        ),
        {"limit": _LIMIT},
        86400,
    ),
)


@functools.cache
def _real_spec_text() -> str:
    return REAL_SPEC.read_text(encoding="utf-8")


def _real_spec() -> dict[str, Any]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    data: dict[str, Any] = yaml.load(_real_spec_text(), Loader=loader)
    if isinstance(data.get("search", {}).get("vocabulary"), str):  # inlined: the spec may be written anywhere
        vocabulary = (REAL_SPEC.parent / data["search"]["vocabulary"]).read_text(encoding="utf-8")
        data["search"] = {"vocabulary": yaml.load(vocabulary, Loader=loader)}
    return data


@functools.cache
def real_tool_count() -> int:
    """How many tools the real spec has (128 for the bundled Alpha Vantage spec)."""
    return len(_real_spec()["tools"])


@functools.cache
def _taken_words() -> frozenset[str]:
    """Words a ticker must not be: any word of the real spec or the templates (tickers would match them)."""
    text = _real_spec_text() + repr(TEMPLATES) + repr(SECTORS)
    return frozenset(re.findall(r"[a-z0-9]+", text.lower()))


def companies(count: int, seed: int = 0) -> list[Company]:
    """`count` invented companies with unique names and tickers; the same list for the same seed."""
    rng = random.Random(seed)
    parts = (_STEM_STARTS.split(), _STEM_MIDDLES.split(), _STEM_ENDS.split())
    stems = list(dict.fromkeys(start + middle + end for start, middle, end in itertools.product(*parts)))
    if count > len(stems):
        raise ValueError(f"at most {len(stems)} companies ({len(stems) * len(TEMPLATES)} tools) can be invented")
    rng.shuffle(stems)
    taken = _taken_words()
    tickers: set[str] = set()
    result = []
    for stem in stems[:count]:
        sector = rng.choice(SECTORS)
        ticker = _ticker(stem, rng, lambda t: t not in tickers and t.lower() not in taken)
        tickers.add(ticker)
        name = f"{stem} {sector.industry} {rng.choice(_CORPORATE)}"
        result.append(Company(name=name, short=stem, ticker=ticker, sector=sector))
    return result


def _ticker(stem: str, rng: random.Random, free: Callable[[str], bool]) -> str:
    """Like real tickers: the stem's initial and next consonants (Coranova: CRN, CRNV), else random letters."""
    consonants = "".join(c for c in stem[1:].upper() if c not in "AEIOU")
    for length in (4, 3):
        if len(consonants) >= length - 1 and free(candidate := stem[0].upper() + consonants[: length - 1]):
            return candidate
    while True:
        candidate = stem[0].upper() + "".join(rng.choice(string.ascii_uppercase) for _ in range(rng.choice((2, 3))))
        if free(candidate):
            return candidate


def _company_tool(company: Company, template: ToolTemplate, rng: random.Random) -> dict[str, Any]:
    picked = sorted(rng.sample(range(len(template.examples)), 3))
    return {
        "name": f"{company.ticker}_{template.suffix}",
        "title": company.fill(template.title),
        "category": template.category,
        "summary": company.fill(template.summary),
        "description": company.fill(template.description),
        "params": json.loads(json.dumps(template.params)),  # a copy: callers may change the spec
        "keywords": [company.fill(k) for k in template.keywords],
        "examples": [company.fill(template.examples[i]) for i in picked],
        "cache_ttl_s": template.cache_ttl_s,
    }


def synthetic_spec(n_tools: int, seed: int = 0) -> dict[str, Any]:
    """A spec (plain data, as read from YAML or JSON) with exactly `n_tools` tools.

    Up to 128 tools: a seeded subset of the real ones, in file order. Beyond: all the real tools, then
    ceil((n_tools - 128) / 8) invented companies with 8 tools each (the last one may have fewer).
    """
    if n_tools < 1:
        raise ValueError("n_tools must be at least 1")
    spec = _real_spec()
    real: list[dict[str, Any]] = spec["tools"]
    rng = random.Random(seed)
    if n_tools <= len(real):
        keep = sorted(rng.sample(range(len(real)), n_tools))
        spec["tools"] = [real[i] for i in keep]
        return spec
    missing = n_tools - len(real)
    per_company = len(TEMPLATES)
    tools = list(real)
    for company in companies(-(-missing // per_company), seed):
        for template in TEMPLATES[: min(per_company, n_tools - len(tools))]:
            tools.append(_company_tool(company, template, rng))
    spec["tools"] = tools
    return spec


def synthetic_catalog(n_tools: int, seed: int = 0) -> Catalog:
    """`synthetic_spec` validated by the project's own loader (JSON fast path) and built into a Catalog."""
    text = json.dumps(synthetic_spec(n_tools, seed))
    return build_catalog(parse_spec(text, source=f"<synthetic {n_tools} tools, seed {seed}>"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("n_tools", type=int, help="how many tools the spec has")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-o", "--output", type=Path, help="file to write (.yaml/.yml: YAML; else JSON); default stdout")
    args = parser.parse_args(argv)
    spec = synthetic_spec(args.n_tools, args.seed)
    parse_spec(json.dumps(spec), source="<synthetic>")  # refuse to write a spec the server would reject
    if args.output is not None and args.output.suffix in (".yaml", ".yml"):
        text = yaml.safe_dump(spec, sort_keys=False, allow_unicode=True, width=120)
    else:
        text = json.dumps(spec, ensure_ascii=False) + "\n"
    if args.output is None:
        sys.stdout.write(text)
    else:
        args.output.write_text(text, encoding="utf-8")
        print(f"{args.output}: {len(spec['tools'])} tools (seed {args.seed})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
