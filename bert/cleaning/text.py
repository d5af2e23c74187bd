"""What cleaning compares: a document's normalised text, its words, its word n-grams.

One normalisation for every comparison, stated once:
- Unicode NFC (a composed "é" and "e" + combining accent are the same text),
- every run of whitespace (spaces, tabs, line breaks) is one space, none at either end,
- lower case when the vocabulary is uncased (`vocab.lower_case`): what the model cannot tell
  apart is one text.
Exact duplicates are documents whose normalised texts are equal. Near duplicates and evaluation
overlap compare *words*: the runs of letters and digits (`\\w+`) of the normalised text, so
punctuation and markup spacing do not count, as in GPT-3's contamination study. Chinese and
Japanese are written without spaces, where a run of letters is a whole clause or sentence: there
each character (Han, kana) is a word of its own, so an n-gram of them is n characters, and a
text mixing scripts has word n-grams, character n-grams and n-grams across the two.

N-grams are hashed to 64-bit integers (BLAKE2b of the words' UTF-8, then a polynomial over the
window, in numpy), the same on every machine and in every process; Python's own `hash` is salted
per process and would make the output depend on which worker ran a task.
"""

import hashlib
import re
import unicodedata

import numpy as np

# Scripts written without spaces between words: CJK ideographs (with their extensions and
# iteration marks), hiragana, katakana (with its halfwidth forms). Korean (Hangul) is written with
# spaces and stays in runs; Thai, Lao, Khmer and Myanmar, also unspaced, are not split (yet).
UNSPACED = (
    "\u3005-\u3007\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
    "\uff66-\uff9f\U00020000-\U0003134f"
)
# A word: one letter of an unspaced script, or a run of the other letters and digits.
WORD = re.compile(rf"(?=\w)[{UNSPACED}]|[^\W{UNSPACED}]+")
WHITESPACE = re.compile(r"\s+")
# The polynomial base of n-gram hashes (odd, so multiplication mod 2**64 is a bijection).
NGRAM_BASE = np.uint64(0x9E3779B97F4A7C15)


def normalise(text: str, lower_case: bool) -> str:
    """NFC, whitespace runs to one space, stripped; lower-cased when `lower_case`."""
    text = WHITESPACE.sub(" ", unicodedata.normalize("NFC", text)).strip()
    return text.lower() if lower_case else text


def text_digest(normalised: str) -> bytes:
    """16 bytes naming a normalised text: equal digests are equal texts (BLAKE2b-128; a collision
    between two different documents is not a practical concern)."""
    return hashlib.blake2b(normalised.encode("utf-8"), digest_size=16).digest()


def words(normalised: str) -> list[str]:
    """The words of a normalised text: runs of letters and digits, each character of Chinese or
    Japanese a word of its own."""
    return WORD.findall(normalised)


def word_hashes(tokens: list[str]) -> np.ndarray:
    """uint64 per word (BLAKE2b-64 of its UTF-8). Words repeat (Zipf): each process remembers the
    hashes of up to WORD_CACHE words, which halves the signing pass's time."""
    if len(_word_cache) > WORD_CACHE:
        _word_cache.clear()
    return np.array([_word_cache.get(w) or _hash_word(w) for w in tokens], dtype=np.uint64)


def _hash_word(word: str) -> int:
    # never 0: the cache's `or` above takes 0 for a miss (one word in 2**64 hashes again, no harm)
    value = int.from_bytes(hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest(), "little")
    _word_cache[word] = value
    return value


WORD_CACHE = 1_000_000  # words (about 100 MB); the cache starts over past that
_word_cache: dict[str, int] = {}


def ngram_hashes(hashes: np.ndarray, n: int, whole_if_shorter: bool) -> np.ndarray:
    """The hashes of every window of `n` consecutive words (a polynomial of the word hashes mod
    2**64), unique and sorted. A text of fewer than n words: its whole text as one n-gram when
    `whole_if_shorter` (a short document still has a shingle), else none."""
    count = len(hashes)
    if count < n:
        if not whole_if_shorter or count == 0:
            return np.empty(0, dtype=np.uint64)
        n = count
    with np.errstate(over="ignore"):  # the arithmetic is mod 2**64 on purpose
        window = np.zeros(count - n + 1, dtype=np.uint64)
        for offset in range(n):
            window = window * NGRAM_BASE + hashes[offset : offset + count - n + 1]
        window ^= np.uint64(n)  # windows of different n never share a hash by construction
    return np.unique(window)


def text_ngrams(text: str, n: int, lower_case: bool, whole_if_shorter: bool) -> np.ndarray:
    return ngram_hashes(word_hashes(words(normalise(text, lower_case))), n, whole_if_shorter)


def line_key(line: str, lower_case: bool) -> int | None:
    """A 64-bit key of a line's normalised text (boilerplate counting); None for a blank line."""
    normalised = normalise(line, lower_case)
    if not normalised:
        return None
    return int.from_bytes(hashlib.blake2b(normalised.encode("utf-8"), digest_size=8).digest(), "little")


def line_keys(text: str, lower_case: bool) -> np.ndarray:
    """The distinct keys of a document's lines (paragraphs), sorted."""
    keys = {key for line in text.split("\n") if (key := line_key(line, lower_case)) is not None}
    return np.array(sorted(keys), np.uint64)


def strip_lines(text: str, keys: np.ndarray, lower_case: bool) -> tuple[str, int]:
    """`text` without its lines whose key is in `keys` (sorted); and how many lines went."""
    if not len(keys):
        return text, 0
    kept, dropped = [], 0
    for line in text.split("\n"):
        key = line_key(line, lower_case)
        if key is not None and keys[min(np.searchsorted(keys, np.uint64(key)), len(keys) - 1)] == key:
            dropped += 1
        else:
            kept.append(line)
    return "\n".join(kept), dropped


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """Exact Jaccard similarity of two sorted unique hash arrays (1.0 for two empty ones)."""
    if len(a) == 0 and len(b) == 0:
        return 1.0
    common = len(np.intersect1d(a, b, assume_unique=True))
    return common / (len(a) + len(b) - common)
