"""Retrieval evaluation of TOOL_SEARCH: graded queries in, Recall@k / MRR / nDCG / MAP / no-match rate out.

A query file is JSONL, one labelled query a line: ``{"id", "query", "relevant": {tool: 1|2}, "kind",
"split"}``. Grade 2 marks a tool that answers the query; grade 1 one that is merely acceptable; an
empty ``relevant`` marks an off-topic query whose right answer is no result at all. A ranker is any
callable ``(query, limit) -> [tool names, best first]``: the engine (TOOL_SEARCH exactly as agents call
it) or the plain BM25 baseline below, the reference point every search change is measured against.
Example::

    catalog = load_catalog()
    queries = load_queries("eval/queries.jsonl", catalog)
    runs = {"engine": run_eval(catalog, queries, engine_ranker(catalog)),
            "bm25": run_eval(catalog, queries, BM25Baseline(catalog.tools))}
    print(format_table(runs))

Metric definitions (k = 10 unless named; a "hit" is a grade-2 tool, because grade 1 is only acceptable):

- ``recall@k``: share of positive queries with at least one grade-2 tool in the top k (success@k).
- ``multi_tool_recall@10``: over queries with two or more grade-2 tools, the mean share of those
  tools found in the top 10 (``recall@k`` counts such a query as solved by its first tool).
- ``mrr``: mean of 1 / rank of the first grade-2 tool, 0 when none is in the top 10.
- ``ndcg@10``: graded gains 2^grade - 1 (grade 1 and 2 both count), discount log2(rank + 1),
  normalised by the ideal ordering of the query's own labels.
- ``map@10``: mean average precision over grade-2 tools: the sum of precision@i at each rank i <= 10
  holding a grade-2 tool, divided by min(number of grade-2 tools, 10).
- ``no_match_rate``: share of negative queries answered with an empty list.
- ``false_no_match_rate``: share of positive queries answered with an empty list.
- latency: time.perf_counter() around each ranker call on a second, warm pass; mean, p50, p99
  (nearest rank) in ms over all queries.

What one answer shows, with an answerer (`surface_answerer`: TOOL_SEARCH with the query alone, through the real
surface, as an agent calls it; its answer read as the text the agent reads):

- ``shown``: share of positive queries with a grade-2 tool's name anywhere in the answer text (detailed hits,
  the compact tail, low-confidence candidates, the closest tools a "nothing fits" answer names), as a whole name
  (`names_shown`).
- ``answer_tokens_p50`` / ``answer_tokens_p90``: cl100k tokens of that text over positive queries (nearest rank).
- ``answer_no_match_rate`` / ``answer_false_no_match_rate``: negatives / positives whose answer says no confident
  match: its ``results`` are empty, whether or not it lists low-confidence candidates. Such candidates count
  toward ``shown`` (the agent reads them) and not against no-match (the answer says none is a confident match).
  The table's ``no_match_rate`` / ``false_no_match_rate`` (the ranker's empty list: TOOL_SEARCH's `results`) are
  the same reading of the same answers.
- ``candidates_on_negatives``: share of negatives whose answer lists low-confidence candidates rather than reading
  as nothing fits (a "nothing fits" answer's few `closest` tools are not candidates).
"""

from __future__ import annotations

import json
import math
import re
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from progressive_mcp.catalog import Catalog
from progressive_mcp.errors import InputFileError
from progressive_mcp.search.semantic import describe, semantic_enabled
from progressive_mcp.sources import load_catalog

Ranker = Callable[[str, int], list[str]]
"""A search under test: (query, limit) -> tool names, best first; an empty list means "no match"."""
Answerer = Callable[[str], str]
"""TOOL_SEARCH as an agent calls it: (query) -> the answer's text, what the agent reads."""

K = 10
HIT_GRADE = 2
GRADES = (1, 2)
SPLITS = ("dev", "test")
MAX_LISTED_PROBLEMS = 50
# Rows of the comparison table: (label, metric key); per-kind and per-split rows follow them.
TABLE_ROWS = (
    ("Recall@1", "recall@1"),
    ("Recall@5", "recall@5"),
    ("Recall@10", "recall@10"),
    ("MRR@10", "mrr"),
    ("nDCG@10", "ndcg@10"),
    ("MAP@10", "map@10"),
    ("multi-tool recall@10", "multi_tool_recall@10"),
    ("false no-match (positives)", "false_no_match_rate"),
    ("no-match rate (negatives)", "no_match_rate"),
)
# Rows of what one answer shows, when an answerer ran: (label, metric key, format).
ANSWER_ROWS = (
    ("shown in one TOOL_SEARCH answer (grade 2)", "shown", ".3f"),
    ("answer tokens p50 (positives)", "answer_tokens_p50", ".0f"),
    ("answer tokens p90 (positives)", "answer_tokens_p90", ".0f"),
    ("answer: no confident match (negatives)", "answer_no_match_rate", ".3f"),
    ("answer: no confident match (positives)", "answer_false_no_match_rate", ".3f"),
    ("answer: candidates listed (negatives)", "candidates_on_negatives", ".3f"),
)
# A tool name is whole where no character a name can hold comes before it (a line break escaped in JSON, `\n`, ends
# the line before) and none follows it (a full stop followed by one continues it: `memory.create_entities`).
_NAME_BEFORE = r"(?:(?<=\\n)|(?<![\w.\-/]))"
_NAME_AFTER = r"(?![\w\-/]|\.[\w])"


class QueryFileError(InputFileError):
    """A query file is unreadable or invalid; `problems` holds one line per problem, naming its line."""

    kind = "the query file"
    max_listed = MAX_LISTED_PROBLEMS


class EvalQuery(BaseModel):
    """One labelled query. Fields beyond these five (notes, authors) are allowed and ignored."""

    model_config = ConfigDict(frozen=True, strict=True, extra="ignore")

    id: str = Field(min_length=1)
    query: str = Field(min_length=1)
    relevant: dict[str, int]
    kind: str = Field(min_length=1)
    split: Literal["dev", "test"]

    @field_validator("query")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value

    @field_validator("relevant", mode="before")
    @classmethod
    def _graded(cls, value: Any) -> Any:
        # Checked by hand: pydantic would take true for 1 and 2.0 for 2, even in strict mode.
        if not isinstance(value, dict):
            return value  # pydantic reports the wrong type
        wrong = [
            f"{name!r}: {grade!r}" for name, grade in value.items() if type(grade) is not int or grade not in GRADES
        ]
        if wrong:
            raise ValueError(f"grades must be the integers 1 or 2, not {', '.join(wrong)}")
        if value and HIT_GRADE not in value.values():
            raise ValueError("a positive query needs at least one grade-2 tool ({} marks an off-topic query)")
        return value

    @property
    def positive(self) -> bool:
        return bool(self.relevant)


def parse_queries(lines: Iterable[str], catalog: Catalog, source: str = "<queries>") -> list[EvalQuery]:
    """Validate JSONL lines (blank lines skipped) against the catalog; raises QueryFileError listing every problem."""
    queries: list[EvalQuery] = []
    problems: list[str] = []
    first_line_of: dict[str, int] = {}
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            data = json.loads(text, object_pairs_hook=_no_duplicate_keys)
        except json.JSONDecodeError as exc:
            problems.append(f"line {number}: not valid JSON: {exc.msg} at column {exc.colno}")
            continue
        except ValueError as exc:  # a key given twice
            problems.append(f"line {number}: not valid JSON: {exc}")
            continue
        if not isinstance(data, dict):
            problems.append(f"line {number}: expected a JSON object, got {type(data).__name__}")
            continue
        # Unknown tools and repeated ids are reported even when other fields are wrong.
        relevant = data.get("relevant")
        for name in relevant if isinstance(relevant, dict) else ():
            if name not in catalog:
                close = catalog.suggest(str(name))
                hint = f" (did you mean {', '.join(close)}?)" if close else ""
                problems.append(f"line {number}: relevant: unknown tool {name!r}{hint}")
        query_id = data.get("id")
        if isinstance(query_id, str) and query_id in first_line_of:
            problems.append(f"line {number}: duplicate id {query_id!r} (first on line {first_line_of[query_id]})")
        elif isinstance(query_id, str):
            first_line_of[query_id] = number
        try:
            queries.append(EvalQuery.model_validate(data))
        except ValidationError as exc:
            problems.extend(f"line {number}: {_describe(error)}" for error in exc.errors())
    if not problems and not queries:
        problems.append("no queries")
    if problems:
        raise QueryFileError(source, problems)
    return queries


def load_queries(path: str | Path, catalog: Catalog) -> list[EvalQuery]:
    """The queries of a JSONL file, validated (see `parse_queries`)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise QueryFileError(str(path), [f"cannot read the file: {exc}"]) from None
    return parse_queries(text.splitlines(), catalog, str(path))


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = Counter(key for key, _ in pairs)
    repeated = sorted(key for key, count in keys.items() if count > 1)
    if repeated:
        raise ValueError(f"duplicate key(s) {', '.join(map(repr, repeated))}")
    return dict(pairs)


def _describe(error: Any) -> str:
    where = ".".join(str(part) for part in error["loc"]) or "record"
    if error["type"] == "missing":
        return f"missing field {where!r}"
    got = repr(error["input"])
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "value_error":  # our own checks name the offending values
        return f"{where}: {message}"
    return f"{where}: {message} (got {got[:80] + '...' if len(got) > 80 else got})"


# --- metrics of one ranking -------------------------------------------------------------------------------


def first_hit_rank(ranked: Sequence[str], grades: Mapping[str, int], k: int = K) -> int | None:
    """1-based rank of the first grade-2 tool within the top k, or None."""
    return next((rank for rank, name in enumerate(ranked[:k], 1) if grades.get(name, 0) >= HIT_GRADE), None)


def hit_at(ranked: Sequence[str], grades: Mapping[str, int], k: int) -> float:
    """1.0 when a grade-2 tool is in the top k, else 0.0."""
    return 0.0 if first_hit_rank(ranked, grades, k) is None else 1.0


def reciprocal_rank(ranked: Sequence[str], grades: Mapping[str, int], k: int = K) -> float:
    rank = first_hit_rank(ranked, grades, k)
    return 0.0 if rank is None else 1.0 / rank


def tool_recall_at(ranked: Sequence[str], grades: Mapping[str, int], k: int = K) -> float:
    """Share of the grade-2 tools found in the top k."""
    answers = {name for name, grade in grades.items() if grade >= HIT_GRADE}
    return len(answers.intersection(ranked[:k])) / len(answers) if answers else 0.0


def ndcg_at(ranked: Sequence[str], grades: Mapping[str, int], k: int = K) -> float:
    """nDCG@k with gains 2^grade - 1 and the ideal ordering taken from the labels."""
    ideal = _dcg(sorted(grades.values(), reverse=True)[:k])
    return _dcg([grades.get(name, 0) for name in ranked[:k]]) / ideal if ideal else 0.0


def _dcg(grades: Sequence[int]) -> float:
    return sum((2**grade - 1) / math.log2(rank + 1) for rank, grade in enumerate(grades, 1))


def average_precision_at(ranked: Sequence[str], grades: Mapping[str, int], k: int = K) -> float:
    """AP@k over grade-2 tools, normalised by min(their number, k)."""
    answers = {name for name, grade in grades.items() if grade >= HIT_GRADE}
    if not answers:
        return 0.0
    found, total = 0, 0.0
    for rank, name in enumerate(ranked[:k], 1):
        if name in answers:
            found += 1
            total += found / rank
    return total / min(len(answers), k)


def no_match_rate(rankings: Iterable[Sequence[str]]) -> float | None:
    """Share of rankings that are empty; None for no rankings."""
    empties = [not ranked for ranked in rankings]
    return sum(empties) / len(empties) if empties else None


def percentile(values: Sequence[float], share: float) -> float:
    """Nearest-rank percentile (share in 0..1) of a non-empty sequence."""
    ordered = sorted(values)
    return ordered[max(math.ceil(share * len(ordered)) - 1, 0)]


# --- rankers ----------------------------------------------------------------------------------------------


def search_surface(catalog: Catalog, *, semantic: bool | None = None) -> Any:
    """The meta-tools over the whole catalog, for `engine_ranker` and `surface_answerer` to share."""
    from progressive_mcp.surfaces.metatools import MetaTools

    return MetaTools(catalog, semantic=semantic)


def engine_ranker(catalog: Catalog, *, semantic: bool | None = None, meta: Any = None) -> Ranker:
    """The project's search exactly as agents reach it: TOOL_SEARCH over the whole catalog, no category;
    `semantic`: with or without the semantic signal (None: as PMCP_SEMANTIC says); `meta`: the MetaTools to ask
    (`search_surface`; None: its own)."""
    if meta is None:
        meta = search_surface(catalog, semantic=semantic)

    def rank(query: str, limit: int) -> list[str]:
        return [hit["name"] for hit in meta.tool_search({"query": query, "limit": limit})["results"]]

    return rank


def surface_answerer(catalog: Catalog, *, meta: Any = None, semantic: bool | None = None) -> Answerer:
    """TOOL_SEARCH with the query alone through the real progressive surface, as an agent calls it: the text of
    its result. `meta`: the MetaTools to serve it from (shared with `engine_ranker`; None: its own)."""
    from progressive_mcp.surfaces.metatools import TOOL_SEARCH, MetaTools
    from progressive_mcp.surfaces.surface import CallContext, Surface

    surface = Surface(catalog, meta=meta if meta is not None else MetaTools(catalog, semantic=semantic))
    context = CallContext()

    def answer(query: str) -> str:
        result = surface.call_tool_wire(TOOL_SEARCH, {"query": query}, context)
        return "".join(part["text"] for part in result["content"] if part.get("type") == "text")

    return answer


def names_shown(text: str, names: Iterable[str]) -> list[str]:
    """The names of `names` that `text` holds as whole names (`stock_quote` is not in `stock_quote_history`)."""
    return [name for name in names if re.search(_NAME_BEFORE + re.escape(name) + _NAME_AFTER, text)]


def _read_answer(text: str, relevant: Mapping[str, int], grade: int) -> dict[str, Any]:
    """What one answer shows of a query's tools of at least `grade`, its tokens, and whether it says no confident
    match (no `results`) and lists low-confidence candidates."""
    from progressive_mcp.tokens import count_tokens

    try:
        payload = json.loads(text)
    except ValueError:
        payload = None
    payload = payload if isinstance(payload, dict) else {}
    return {
        "shown": names_shown(text, sorted(name for name, g in relevant.items() if g >= grade)),
        "tokens": count_tokens(text),
        "no_match": payload.get("results") == [],
        "candidates": bool(payload.get("candidates")),
    }


class Document(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...


_TERM = re.compile(r"[a-z0-9]+")


def bm25_terms(text: str) -> list[str]:
    """Lower-case alphanumeric runs: no stemming, stopwords or synonyms."""
    return _TERM.findall(text.lower())


class BM25Baseline:
    """Plain Okapi BM25 over one document per tool (name split on underscores, plus description): the reference.

    IDF is ln(1 + (N - df + 0.5) / (df + 0.5)), always positive, so a tool scores > 0 exactly when it shares
    a term with the query: the baseline answers "no match" only when no query term occurs in any tool.
    """

    # Written out (~30 lines) rather than taken from rank-bm25: that package floors negative IDFs with an
    # epsilon heuristic, which would blur the score > 0 rule, and a reference is best read in one place.

    def __init__(self, tools: Iterable[Document], *, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self._names: list[str] = []
        self._docs: list[Counter[str]] = []
        for tool in tools:
            self._names.append(tool.name)
            self._docs.append(Counter(bm25_terms(tool.name.replace("_", " ") + " " + tool.description)))
        self._lengths = [sum(doc.values()) for doc in self._docs]
        self._avg_length = (sum(self._lengths) / len(self._docs) if self._docs else 0.0) or 1.0
        doc_freq: Counter[str] = Counter(term for doc in self._docs for term in doc)
        n = len(self._docs)
        self._idf = {term: math.log(1 + (n - df + 0.5) / (df + 0.5)) for term, df in doc_freq.items()}

    def scores(self, query: str) -> dict[str, float]:
        """BM25 score of every tool sharing a term with the query (repeated query terms count again)."""
        terms = [term for term in bm25_terms(query) if term in self._idf]
        scores: dict[str, float] = {}
        for name, doc, length in zip(self._names, self._docs, self._lengths, strict=True):
            score = 0.0
            for term in terms:
                tf = doc.get(term, 0)
                if tf:
                    norm = tf * (self.k1 + 1) / (tf + self.k1 * (1 - self.b + self.b * length / self._avg_length))
                    score += self._idf[term] * norm
            if score > 0:
                scores[name] = score
        return scores

    def __call__(self, query: str, limit: int) -> list[str]:
        ranked = sorted(self.scores(query).items(), key=lambda item: (-item[1], item[0]))
        return [name for name, _ in ranked[:limit]]


BASELINES: dict[str, Callable[[Catalog], Ranker]] = {"bm25": lambda catalog: BM25Baseline(catalog.tools)}


# --- a run ------------------------------------------------------------------------------------------------


def run_eval(
    catalog: Catalog,
    queries: Sequence[EvalQuery],
    ranker: Ranker,
    *,
    k: int = K,
    answer: Answerer | None = None,
    answer_grade: int = HIT_GRADE,
) -> dict[str, Any]:
    """Every metric of one ranker over the queries, overall and by kind and split, plus per-query rankings; with
    `answer`, also what its answer shows of each query's tools of at least `answer_grade` (untimed).

    The set is run once untimed (warm-up), then again timed; the timed pass's rankings are scored.
    """
    unknown = sorted({name for q in queries for name in q.relevant if name not in catalog})
    if unknown:
        raise ValueError(f"relevant tools not in the catalog: {', '.join(unknown)}")
    for query in queries:
        ranker(query.query, k)
    per_query: list[dict[str, Any]] = []
    for query in queries:
        start = time.perf_counter()
        results = ranker(query.query, k)
        elapsed_ms = (time.perf_counter() - start) * 1000
        ranked = list(dict.fromkeys(results))[:k]  # a ranker that repeats a tool gains nothing by it
        record: dict[str, Any] = {
            "id": query.id,
            "query": query.query,
            "kind": query.kind,
            "split": query.split,
            "relevant": dict(query.relevant),
            "results": ranked,
            "first_hit_rank": first_hit_rank(ranked, query.relevant, k) if query.positive else None,
            "latency_ms": elapsed_ms,
        }
        if answer is not None:
            record["answer"] = _read_answer(answer(query.query), query.relevant, answer_grade)
        per_query.append(record)
    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    by_split: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in per_query:
        by_kind[record["kind"]].append(record)
        by_split[record["split"]].append(record)
    latencies = [record["latency_ms"] for record in per_query]
    return {
        "catalog_version": catalog.version,
        "k": k,
        **({"answer_grade": answer_grade} if answer is not None else {}),
        **_summarise(per_query, k),
        "by_kind": {kind: _summarise(records, k) for kind, records in sorted(by_kind.items())},
        "by_split": {split: _summarise(records, k) for split, records in sorted(by_split.items())},
        "latency_ms": {
            "mean": statistics.fmean(latencies) if latencies else None,
            "p50": percentile(latencies, 0.50) if latencies else None,
            "p99": percentile(latencies, 0.99) if latencies else None,
        },
        "per_query": per_query,
    }


def _summarise(records: Sequence[dict[str, Any]], k: int) -> dict[str, Any]:
    positives = [r for r in records if r["relevant"]]
    negatives = [r for r in records if not r["relevant"]]
    multi = [r for r in positives if sum(g >= HIT_GRADE for g in r["relevant"].values()) > 1]

    def mean(values: list[float]) -> float | None:
        return statistics.fmean(values) if values else None

    answered = {}
    if records and all("answer" in r for r in records):
        tokens = [r["answer"]["tokens"] for r in positives]
        answered = {
            "shown": mean([float(bool(r["answer"]["shown"])) for r in positives]),
            "answer_tokens_p50": percentile(tokens, 0.5) if tokens else None,
            "answer_tokens_p90": percentile(tokens, 0.9) if tokens else None,
            "answer_no_match_rate": mean([float(r["answer"]["no_match"]) for r in negatives]),
            "answer_false_no_match_rate": mean([float(r["answer"]["no_match"]) for r in positives]),
            "candidates_on_negatives": mean([float(r["answer"]["candidates"]) for r in negatives]),
        }
    return {
        "counts": {
            "queries": len(records),
            "positive": len(positives),
            "negative": len(negatives),
            "multi_tool": len(multi),
        },
        "metrics": {
            "recall@1": mean([hit_at(r["results"], r["relevant"], 1) for r in positives]),
            "recall@5": mean([hit_at(r["results"], r["relevant"], 5) for r in positives]),
            f"recall@{k}": mean([hit_at(r["results"], r["relevant"], k) for r in positives]),
            "mrr": mean([reciprocal_rank(r["results"], r["relevant"], k) for r in positives]),
            f"ndcg@{k}": mean([ndcg_at(r["results"], r["relevant"], k) for r in positives]),
            f"map@{k}": mean([average_precision_at(r["results"], r["relevant"], k) for r in positives]),
            f"multi_tool_recall@{k}": mean([tool_recall_at(r["results"], r["relevant"], k) for r in multi]),
            "false_no_match_rate": no_match_rate(r["results"] for r in positives),
            "no_match_rate": no_match_rate(r["results"] for r in negatives),
            **answered,
        },
    }


def summary(run: Mapping[str, Any]) -> dict[str, Any]:
    """A run without its per-query rankings: the figures `--json` prints."""
    return {key: value for key, value in run.items() if key != "per_query"}


def misses(run: Mapping[str, Any], limit: int, *, within: int = 5) -> dict[str, Any]:
    """Up to `limit` positives without a grade-2 tool in the top `within` and up to `limit` negatives with results,
    with the total of each."""
    positives = [
        {
            "id": r["id"],
            "query": r["query"],
            "kind": r["kind"],
            "split": r["split"],
            "wanted": sorted(name for name, grade in r["relevant"].items() if grade >= HIT_GRADE),
            "first_hit_rank": r["first_hit_rank"],
            "results": r["results"][:within],
        }
        for r in run["per_query"]
        if r["relevant"] and (r["first_hit_rank"] is None or r["first_hit_rank"] > within)
    ]
    negatives = [
        {"id": r["id"], "query": r["query"], "kind": r["kind"], "split": r["split"], "results": r["results"][:3]}
        for r in run["per_query"]
        if not r["relevant"] and r["results"]
    ]
    return {
        "positives": positives[:limit],
        "negatives": negatives[:limit],
        "positives_total": len(positives),
        "negatives_total": len(negatives),
    }


# --- text output ------------------------------------------------------------------------------------------


def format_table(runs: Mapping[str, Mapping[str, Any]]) -> str:
    """One table, metrics down and rankers across; per-kind and per-split rows follow the overall ones."""
    names = list(runs)
    first = runs[names[0]]
    k = first["k"]
    width = max(10, *(len(n) for n in names))
    counts = first["counts"]
    lines = [
        f"{counts['queries']} queries: {counts['positive']} positive ({counts['multi_tool']} multi-tool), "
        f"{counts['negative']} negative; hit = a grade-2 tool; k = {k}",
        "",
        f"{'metric':<40}" + "".join(f" {name:>{width}}" for name in names),
    ]

    def row(label: str, values: list[Any], fmt: str = ".3f") -> None:
        cells = "".join(f" {('n/a' if v is None else format(v, fmt)):>{width}}" for v in values)
        lines.append(f"{label:<40}{cells}")

    for label, key in TABLE_ROWS:
        key = key.replace("@10", f"@{k}")
        row(label.replace("@10", f"@{k}"), [runs[n]["metrics"].get(key) for n in names])
    for label, key, fmt in ANSWER_ROWS:
        if any(key in runs[n]["metrics"] for n in names):
            row(label, [runs[n]["metrics"].get(key) for n in names], fmt)
    for group in ("by_kind", "by_split"):
        axis = group.removeprefix("by_")
        for value, part in first[group].items():
            label_counts = part["counts"]
            if label_counts["positive"]:
                label = f"Recall@5   {axis}={value} (n={label_counts['positive']})"
                row(label, [runs[n][group].get(value, {}).get("metrics", {}).get("recall@5") for n in names])
            if label_counts["negative"]:
                label = f"no-match   {axis}={value} (n={label_counts['negative']})"
                row(label, [runs[n][group].get(value, {}).get("metrics", {}).get("no_match_rate") for n in names])
    for stat in ("mean", "p50", "p99"):
        row(f"latency {stat} (ms)", [runs[n]["latency_ms"][stat] for n in names], ".4f")
    return "\n".join(lines)


def format_misses(found: Mapping[str, Any], ranker: str = "engine") -> str:
    """The misses of `misses` as text, one query (and what came back) per entry."""
    shown = f"{len(found['positives'])} of {found['positives_total']} shown"
    lines = [f"Positives without a grade-2 tool in {ranker}'s top 5 ({shown}):"]
    for miss in found["positives"]:
        rank = miss["first_hit_rank"]
        at = f"first hit at rank {rank}" if rank else "no hit in top 10"
        got = ", ".join(miss["results"]) or "(no results)"
        lines.append(f"  {miss['id']} [{miss['kind']}/{miss['split']}] {miss['query']!r}")
        lines.append(f"      want {', '.join(miss['wanted'])}; {at}; got {got}")
    shown = f"{len(found['negatives'])} of {found['negatives_total']} shown"
    lines.append(f"Negatives that got results from {ranker}, top 3 ({shown}):")
    for miss in found["negatives"]:
        lines.append(
            f"  {miss['id']} [{miss['kind']}/{miss['split']}] {miss['query']!r} -> {', '.join(miss['results'])}"
        )
    return "\n".join(lines)


def select_split(queries: Sequence[EvalQuery], split: str) -> list[EvalQuery]:
    """The queries of one split; "all" keeps every query."""
    if split not in (*SPLITS, "all"):
        raise ValueError(f"split must be one of {', '.join(SPLITS)} or all, not {split!r}")
    return list(queries) if split == "all" else [q for q in queries if q.split == split]


def evaluation_report(
    queries_path: str | Path,
    *,
    spec_path: str | Path | None = None,
    vocabulary: str | Path | None = None,
    baseline: str | None = None,
    split: str = "all",
    as_json: bool = False,
    show_misses: int = 0,
) -> str:
    """What `progressive-mcp eval` prints: the engine (and a baseline beside it) as a table or JSON.

    Raises QueryFileError (or SpecError) when an input is invalid.
    """
    catalog = load_catalog(spec_path, vocabulary=vocabulary)
    queries = select_split(load_queries(queries_path, catalog), split)
    if not queries:
        raise QueryFileError(str(queries_path), [f"no queries in split {split!r}"])
    meta = search_surface(catalog)
    runs = {
        "engine": run_eval(
            catalog, queries, engine_ranker(catalog, meta=meta), answer=surface_answerer(catalog, meta=meta)
        )
    }
    if baseline:
        runs[baseline] = run_eval(catalog, queries, BASELINES[baseline](catalog))
    found = misses(runs["engine"], show_misses) if show_misses > 0 else None
    if as_json:
        figures: dict[str, Any] = {
            "queries_file": str(queries_path),
            "split": split,
            "catalog_version": catalog.version,
            "semantic": semantic_enabled(),
            "runs": {name: summary(run) for name, run in runs.items()},
        }
        if found is not None:
            figures["misses"] = found
        return json.dumps(figures, indent=2)
    signal = describe(semantic_enabled())
    title = f"TOOL_SEARCH evaluation: {queries_path}, split {split}, {len(catalog)} tools, semantic signal {signal}"
    text = f"{title}\n{format_table(runs)}"
    if found is not None:
        text += "\n\n" + format_misses(found)
    return text
