"""What the operator and migration functions share: counts, wording, progress."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable

#: Progress callback: (items done, items in total).
Progress = Callable[[int, int], None]

#: What becomes of a committed offset outside its partition's log, as every warning and
#: refusal about one says it (``groups describe``, ``offsets import``, ``migrate status``
#: and ``copy``): the consumer's fetch there is out of range.
OUT_OF_LOG_RESET = "a member fetching there resets the offset by auto.offset.reset"


def counted(n: int, noun: str) -> str:
    """"1 offset", "2 offsets": a count and its noun, for messages."""
    return f"{n} {noun}{'s' if n != 1 else ''}"




def did_you_mean(name: str, candidates: Iterable[str], *, quote: bool = True) -> str:
    """`` (did you mean 'x'?)`` for a candidate one typo away from ``name`` (a letter
    missing, added, changed, or two swapped), or "" when there is none; ``quote`` False for
    flags (``--zookeeper``), which are not quoted. One typo only: names that share a long
    part (``orders-eu``, ``orders-us``) are not each other's misspellings."""
    close = sorted((c for c in set(candidates) if c != name and _one_typo(name, c)),
                   key=lambda c: -difflib.SequenceMatcher(None, name, c).ratio())
    if not close:
        return ""
    return f" (did you mean {close[0]!r}?)" if quote else f" (did you mean {close[0]}?)"


def _one_typo(a: str, b: str) -> bool:
    """Whether ``b`` is ``a`` with one letter missing, added, changed, or two adjacent ones
    swapped."""
    if abs(len(a) - len(b)) > 1:
        return False
    start = 0
    while start < min(len(a), len(b)) and a[start] == b[start]:
        start += 1
    a, b = a[start:], b[start:]
    return (a[1:] == b[1:] or a[1:] == b or a == b[1:]
            or (len(a) >= 2 and a[:2] == b[1::-1] and a[2:] == b[2:]))
