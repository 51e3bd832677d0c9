"""LongNovel length extension (seed 000, section 3.3) over a corpus of units.

For a context X = [u_t .. u_{t+k-1}] the summary sequence takes the reference
summaries s_i, with the j-th replaced by the hallucinated rewrite h_j (label 1)
or the faithful rewrite g_j (label 0). Both variants of every context are
emitted, so labels are balanced and the pair differs in the j-th unit alone.
Contexts never cross a book, and train/test are split by book.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from data_builders.records import POSITIONS, validate_record
from data_builders.span_offsets import span
from data_builders.synthetic.novel_corpus import Unit

DEFAULT_BUDGETS = {"S": 2048, "M": 16384, "L": 32768, "XL": 65536, "XXL": 102400}
SUMMARY_SEP = "\n"


@dataclass
class BuildReport:
    counts: dict = field(default_factory=dict)        # (split, bucket) -> records
    unfilled_tail_units: int = 0                     # units left over after the last window

    def table(self) -> str:
        rows = [f"{s:5s} {b:4s} {n:6d}" for (s, b), n in sorted(self.counts.items())]
        return "split bucket records\n" + "\n".join(rows)


def position_of(offset: int, k: int) -> str:
    """Where the replaced unit sits in the context: thirds of the unit sequence."""
    return POSITIONS[min(2, int(3 * (offset + 0.5) / k))]


def pick_offset(window_index: int, k: int) -> int:
    """Cycle the replaced unit through beginning / middle / end across windows."""
    if k < 3:
        return 0 if k == 1 else window_index % 2
    third = window_index % 3
    lo, hi = (k * third) // 3, (k * (third + 1)) // 3
    return (lo + hi - 1) // 2 if hi > lo else lo


def edit_span(faithful: str, hallucinated: str) -> tuple[int, int]:
    """[start, end) of what the injection changed in `hallucinated`: it without the prefix and the
    suffix it shares with `faithful`."""
    shorter = min(len(faithful), len(hallucinated))
    prefix = next((i for i, (a, b) in enumerate(zip(faithful, hallucinated)) if a != b), shorter)
    room = shorter - prefix
    suffix = next((i for i in range(room) if faithful[-1 - i] != hallucinated[-1 - i]), room)
    return prefix, len(hallucinated) - suffix


def context_records(units: list[Unit], j: int, bucket: str, split: str) -> list[dict]:
    """The hallucinated and the faithful record of one context."""
    t, k, u = units[0].unit_index, len(units), units[j]
    base = {
        "task": "summarization", "language": u.language,
        "source": "\n\n".join(x.text for x in units),
        "position": position_of(j, k), "length_bucket": bucket,
        "meta": {"book_id": u.book_id, "first_unit": t, "n_units": k,
                 "replaced_unit": u.unit_index, "split": split},
    }
    stem = f"{u.book_id}-{bucket}-u{t:03d}k{k:02d}j{u.unit_index:03d}"
    summaries = [x.summary for x in units]
    hallucinated = summaries[:j] + [u.hallucinated_summary] + summaries[j + 1:]
    faithful = summaries[:j] + [u.faithful_summary] + summaries[j + 1:]
    at = sum(len(x) + len(SUMMARY_SEP) for x in summaries[:j])
    start, end = edit_span(u.faithful_summary, u.hallucinated_summary)
    return [
        {**base, "id": f"{stem}-h", "response": SUMMARY_SEP.join(hallucinated), "label": 1,
         "spans": [span((at + start, at + end), type=u.hallucination_type)],
         "hallucination_types": [u.hallucination_type], "hallucinated_sentences": [u.hallucinated_sentence],
         "corrections": [u.correction], "reasons": [u.reason]},
        {**base, "id": f"{stem}-f", "response": SUMMARY_SEP.join(faithful), "label": 0, "spans": [],
         "hallucination_types": [], "hallucinated_sentences": [], "corrections": [], "reasons": []},
    ]


def windows(book: list[Unit], budget: int, min_fill: float, estimate: Callable[[list[Unit]], int],
            exact: Callable[[list[Unit]], int], report: BuildReport) -> Iterable[tuple[list[Unit], int]]:
    """Consecutive, non-overlapping contexts whose samples fit `budget`, at least `min_fill` full.

    `estimate` adds per-unit token counts (cheap); `exact` tokenises the whole sample once.
    Yields (context, exact token count of its longer variant).
    """
    t = 0
    while t < len(book):
        k = 1
        while t + k < len(book) and estimate(book[t:t + k + 1]) <= budget:
            k += 1
        n = exact(book[t:t + k])
        while n > budget and k > 1:
            k -= 1
            n = exact(book[t:t + k])
        if n > budget or n < min_fill * budget:
            report.unfilled_tail_units += len(book) - t
            return
        yield book[t:t + k], n
        t += k


def build_longnovel(units: list[Unit], tokenizer, buckets: dict[str, int], test_books: int,
                    template: str = "prompt_e", min_fill: float = 0.75,
                    report: BuildReport | None = None, val_books: int = 0) -> dict[str, list[dict]]:
    """Records per split ('train', 'test') for the requested buckets {name: token budget}.

    Bucket S holds single units (its budget only caps them); longer buckets take as
    many consecutive units as fit. `n_tokens` counts the whole rendered sample. The
    last `test_books` books form the test split, the `val_books` before them the
    validation split (for choosing decision thresholds; never the test split).
    """
    report = report or BuildReport()
    books: dict[str, list[Unit]] = {}
    for u in units:
        books.setdefault(u.book_id, []).append(u)
    names = sorted(books)
    if not 0 < test_books or test_books + val_books >= len(names) or val_books < 0:
        raise ValueError(f"data.corpus.test_books={test_books}, val_books={val_books}: a corpus of "
                         f"{len(names)} books needs at least one training book")
    n_train = len(names) - test_books - val_books
    split_of = {b: "train" if i < n_train else "val" if i < n_train + val_books else "test"
                for i, b in enumerate(names)}
    measure = _Measure(tokenizer, template)
    out: dict[str, list[dict]] = {"train": [], "val": [], "test": []}
    for bucket, budget in sorted(buckets.items(), key=lambda kv: kv[1]):
        fill = 0.0 if bucket == "S" else min_fill
        window_index = 0
        for book_id in names:
            book = books[book_id]
            contexts = [[u] for u in book] if bucket == "S" else \
                [ctx for ctx, _ in windows(book, budget, fill, measure.estimate, measure.exact, report)]
            for ctx in contexts:
                split = split_of[book_id]
                for rec in context_records(ctx, pick_offset(window_index, len(ctx)), bucket, split):
                    rec["n_tokens"] = measure.record(rec)
                    out[split].append(validate_record(rec))
                    report.counts[(split, bucket)] = report.counts.get((split, bucket), 0) + 1
                window_index += 1
    return out


class _Measure:
    """Token counts of samples: exact by rendering, or estimated from cached per-unit counts."""

    def __init__(self, tokenizer, template: str):
        from data_builders.model_inputs.collate import encode_sample

        self._encode = lambda rec: len(encode_sample(rec, tokenizer, template)["input_ids"])
        self._count = lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"])
        self._unit: dict[tuple[str, int], int] = {}
        self._overhead: int | None = None

    def record(self, rec: dict) -> int:
        return self._encode(rec)

    def exact(self, ctx: list[Unit]) -> int:
        return max(self._encode(r) for r in context_records(ctx, 0, "S", "-"))

    def estimate(self, ctx: list[Unit]) -> int:
        if self._overhead is None:
            self._overhead = self.exact(ctx[:1]) - self._unit_tokens(ctx[0])
        return self._overhead + sum(self._unit_tokens(u) for u in ctx)

    def _unit_tokens(self, u: Unit) -> int:
        key = (u.book_id, u.unit_index)
        if key not in self._unit:
            self._unit[key] = self._count(u.text) + self._count(u.summary) + 2
        return self._unit[key]
