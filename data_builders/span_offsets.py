"""Locating annotated text in a response: the one way importers turn a released span (a text,
maybe with offsets that index another copy of the response) into the record's `spans`."""
from __future__ import annotations


def find_span(response: str, text: str, hint: int | None = None, after: int = 0) -> tuple[int, int] | None:
    """[start, end) of `text` in `response`: at `hint` when the text is there, else its first
    occurrence from `after`, else its first occurrence anywhere; None when it does not occur."""
    if not isinstance(text, str) or not text:
        return None
    if isinstance(hint, int) and response[hint:hint + len(text)] == text:
        return hint, hint + len(text)
    start = response.find(text, after)
    if start < 0:
        start = response.find(text)
    return (start, start + len(text)) if start >= 0 else None


def span(bounds: tuple[int, int], **extra) -> dict:
    """A record span: its offsets first, then what rides along (text, type, a benchmark's flags)."""
    return {"start": bounds[0], "end": bounds[1], **extra}
