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
    """`` (did you mean 'x'?)`` for the candidate closest to a misspelt ``name``, or ""
    when none is close (as an unknown configuration key is answered); ``quote`` False for
    flags (``--zookeeper``), which are not quoted."""
    match = difflib.get_close_matches(name, sorted(set(candidates)), n=1, cutoff=0.6)
    if not match:
        return ""
    return f" (did you mean {match[0]!r}?)" if quote else f" (did you mean {match[0]}?)"
