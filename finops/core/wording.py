"""Counts in words: "1 team", "3 teams", "1,532 runs", never "team(s)".

Finance reads these sentences in the close review, the checks and the command output; a hedge
such as "job(s)" or "anomaly(ies)" reads like a template, and tests/core/test_plural_words.py
keeps it from coming back.
"""

from __future__ import annotations


def plural(word: str, count: int) -> str:
    """`word` (singular; its last word is the noun) as it reads after `count`: "anomaly" ->
    "anomalies", "fetch" -> "fetches", "team" -> "teams"; plural(word, 1) is the word."""
    if count == 1:
        return word
    if word.endswith("y") and word[-2:-1] not in ("a", "e", "o", "u"):
        return f"{word[:-1]}ies"
    if word.endswith(("s", "x", "ch", "sh")):
        return f"{word}es"
    return f"{word}s"


def counted(count: int, word: str) -> str:
    """`count` with thousands separators and `word` agreeing with it: counted(2, "team")
    is "2 teams", counted(1, "anomaly") is "1 anomaly"."""
    return f"{count:,} {plural(word, count)}"
