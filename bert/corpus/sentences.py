"""Sentence segmentation with NLTK's Punkt.

Punkt needs parameters (abbreviations, collocations, sentence starters, and for every word how it
was capitalised at the start and in the middle of sentences). NLTK ships pretrained English ones
as the `punkt_tab` data package; when it is not installed (e.g. offline machines) we train Punkt
unsupervised on the corpus itself with `PunktTrainer`, save the parameters as a JSON file next to
the shards, and load them from there in every worker.

Trained on a few megabytes, Punkt misses abbreviations and, worse, wrongly trusts its evidence
about capitalisation: it splits "the U.S. Census Bureau" because in its sample "census" was seen
in lower case and never capitalised in mid-sentence (only after "U.S.", which does not count).
With trained parameters we therefore add a curated list of English abbreviations to the learned
ones and decide the breaks after them, and after initials, with `CuratedPunkt`'s rules. With
NLTK's pretrained parameters Punkt runs unchanged: they come from a large corpus, and these rules
were only measured on trained parameters.
"""

import json
import re
import unicodedata
from collections.abc import Iterable
from pathlib import Path

from nltk.tokenize.punkt import (
    _ORTHO_BEG_UC,
    PunktParameters,
    PunktSentenceTokenizer,
    PunktToken,
    PunktTokenizer,
    PunktTrainer,
)

from bert.errors import UserError

# Abbreviations as Punkt stores them: lower-case, without the final period ("u.s" is "U.S.").
# Titles and "e.g."-like words introduce the word after them; none ends a sentence.
NEVER_FINAL_ABBREVIATIONS = frozenset([
    "mr", "mrs", "ms", "messrs", "dr", "prof", "gen", "col", "lt", "sgt", "capt", "cmdr", "adm", "rev",
    "gov", "sen", "rep", "hon", "pres", "e.g", "i.e", "cf", "vs", "viz", "approx", "ca", "a.k.a",
])  # fmt: skip
# These usually qualify the word after them ("U.S. Route 11", "St. Cloud", "No. 5", "Fig. 3",
# "CO2-eq. emissions") but can end a sentence ("common in the U.S. An estimated ..."; "Main St.").
# Punkt ends a sentence after one only when the next word is capitalised and has itself been seen
# starting a sentence. Ordinary words such as "sun", "wed", "mar" are left out.
RARELY_FINAL_ABBREVIATIONS = frozenset([
    "u.s", "u.k", "u.n", "st", "mt", "ft", "no", "nos", "vol", "vols", "pp", "fig", "figs", "est", "eq",
    "dept", "jan", "feb", "apr", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
])  # fmt: skip
# These often end a sentence ("..., paper, etc. The", "Martin Luther King Jr."): Punkt's own
# orthographic rule decides.
FINAL_ABBREVIATIONS = frozenset(["etc", "jr", "sr", "inc", "ltd", "co", "corp", "bros"])
COMMON_ABBREVIATIONS = NEVER_FINAL_ABBREVIATIONS | RARELY_FINAL_ABBREVIATIONS | FINAL_ABBREVIATIONS
# Letters with internal periods ("D.C.", "A.S.", "B.L."): an abbreviation even when training never saw it.
DOTTED_ABBREVIATION = re.compile(r"(?:[^\W\d_]\.){2,}")
PUNKT_FILE = "punkt_params.json"
DEFAULT_TRAINING_CHARS = 20_000_000
# NLTK runs every Punkt regex under a 5-second wall-clock limit (nltk.redos) and scans a whole
# paragraph per call: one 200 MB line (a table dump, a base64 blob) raised TimeoutError after
# minutes at 4 GB. Punkt therefore never sees more than this many characters at once; real
# paragraphs are far shorter, so their sentences are unchanged.
MAX_PIECE_CHARS = 100_000
# Where a long paragraph is best cut: after a sentence end ("." "!" "?" and closing quotes or
# brackets) followed by whitespace; else at whitespace.
_SENTENCE_END = re.compile(r"""[.!?]["')\]]*(?=\s)""")
_WHITESPACE = re.compile(r"\s")


def normalize(text: str) -> str:
    """NFC-normalise and collapse every run of whitespace to one space (non-ASCII is kept)."""
    return " ".join(unicodedata.normalize("NFC", text).split())


def paragraph_pieces(paragraph: str, limit: int | None = None) -> list[str]:
    """Cut a paragraph into normalised pieces of at most `limit` (default MAX_PIECE_CHARS) characters.

    Each cut falls after the last sentence end in the last quarter of the window, else at its last
    whitespace, else (a run without whitespace) at the limit itself. A paragraph within the limit
    is one piece, `normalize(paragraph)`. The paragraph is normalised piece by piece: normalising
    200 MB at once (`str.split`) took GBs.
    """
    limit = limit or MAX_PIECE_CHARS
    pieces = []
    start = 0
    while len(paragraph) - start > limit:
        window_start, end = start + limit * 3 // 4, start + limit
        cut = _last_end(_SENTENCE_END, paragraph, window_start, end) or _last_end(
            _WHITESPACE, paragraph, window_start, end, at_start=True
        )
        cut = cut or end
        pieces.append(normalize(paragraph[start:cut]))
        start = cut
    pieces.append(normalize(paragraph[start:]))
    return [piece for piece in pieces if piece]


def _last_end(pattern: re.Pattern, text: str, start: int, end: int, at_start: bool = False) -> int | None:
    """Where the last match of `pattern` in text[start:end] ends (or starts), None if none."""
    matches = list(pattern.finditer(text, start, end))
    if not matches:
        return None
    return matches[-1].start() if at_start else matches[-1].end()


def _punkt_inputs(text: str) -> list[str]:
    """A document's normalised paragraphs, as "\\n"-joined texts of at most MAX_PIECE_CHARS each
    (a document within the limit is one text, exactly as Punkt saw it before pieces existed)."""
    texts, current, size = [], [], -1
    for paragraph in text.split("\n"):
        for piece in paragraph_pieces(paragraph) or [""]:
            if current and size + 1 + len(piece) > MAX_PIECE_CHARS:
                texts.append("\n".join(current))
                current, size = [], -1
            current.append(piece)
            size += 1 + len(piece)
    if current:
        texts.append("\n".join(current))
    return texts


def pretrained_parameters() -> PunktParameters | None:
    """NLTK's English Punkt parameters, or None when the punkt_tab data is not installed."""
    try:
        return PunktTokenizer("english")._params
    except LookupError:
        return None


def train_parameters(
    texts: Iterable[str], max_chars: int = DEFAULT_TRAINING_CHARS
) -> tuple[PunktParameters, int]:
    """Train Punkt on the first `max_chars` characters of `texts`; returns (parameters, chars used)."""
    trainer = PunktTrainer()
    used = 0
    for text in texts:
        if used >= max_chars:
            break
        for piece in _punkt_inputs(text):
            if used >= max_chars:
                break
            trainer.train(piece, finalize=False)
            used += len(piece)
    if used == 0:
        raise UserError("cannot train Punkt: the corpus has no text")
    trainer.finalize_training()
    parameters = trainer.get_params()
    parameters.abbrev_types.update(COMMON_ABBREVIATIONS)
    return parameters, used


def save_parameters(parameters: PunktParameters, path: str | Path) -> None:
    """Write Punkt parameters as sorted JSON (the same parameters always give the same bytes)."""
    data = {
        "abbrev_types": sorted(parameters.abbrev_types),
        "collocations": sorted([list(pair) for pair in parameters.collocations]),
        "sent_starters": sorted(parameters.sent_starters),
        "ortho_context": dict(sorted(parameters.ortho_context.items())),
    }
    Path(path).write_text(json.dumps(data, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")


def load_parameters(path: str | Path) -> PunktParameters:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        parameters = PunktParameters()
        parameters.abbrev_types = set(data["abbrev_types"])
        parameters.collocations = {tuple(pair) for pair in data["collocations"]}
        parameters.sent_starters = set(data["sent_starters"])
        for word, flags in data["ortho_context"].items():
            parameters.ortho_context[word] = flags
    except (OSError, ValueError, KeyError) as error:
        raise UserError(f"{path}: not a readable Punkt parameter file ({error})") from None
    return parameters


class CuratedPunkt(PunktSentenceTokenizer):
    """Punkt whose breaks after the curated abbreviations and after initials follow our rules.

    Punkt decides in two passes: the first marks every word ending in a period as an abbreviation
    (when in `abbrev_types`) or a sentence break; the second revisits each such word with the word
    after it. We refine the second pass.
    """

    def _second_pass_annotation(self, token: PunktToken, next_token: PunktToken | None) -> str | None:
        if next_token is None or not token.period_final:
            return super()._second_pass_annotation(token, next_token)
        abbreviation = token.type_no_period.split("-")[-1]  # "CO2-eq." is "eq", as in Punkt's first pass
        if abbreviation in NEVER_FINAL_ABBREVIATIONS or (token.is_initial and next_token.is_initial):
            # "Gen. Pope", "e.g. Moon", "A. S. Neill": Punkt cannot tell that a name follows.
            token.abbr, token.sentbreak = True, False
            return "curated: never ends a sentence"
        if DOTTED_ABBREVIATION.fullmatch(token.tok):
            # Punkt's rules for abbreviations decide next, instead of an unconditional break.
            token.abbr, token.sentbreak = True, False
        reason = super()._second_pass_annotation(token, next_token)
        if (
            token.sentbreak
            and abbreviation in RARELY_FINAL_ABBREVIATIONS
            and not self._params.ortho_context[next_token.type_no_sentperiod] & _ORTHO_BEG_UC
        ):
            # A word seen in lower case but never capitalised mid-sentence is, to Punkt, a sentence
            # starter; in a small sample that is often just a word only seen capitalised after the
            # abbreviation ("U.S. Census"). Ask for a sighting at the start of a sentence as well.
            token.sentbreak = False
            return "curated: the next word was never seen starting a sentence"
        return reason


class SentenceSplitter:
    """Splits a document (paragraphs separated by "\n") into normalised sentences.

    `curated` applies CuratedPunkt's rules; it is meant for parameters trained on the corpus.
    """

    def __init__(self, parameters: PunktParameters, curated: bool):
        self.tokenizer = (CuratedPunkt if curated else PunktSentenceTokenizer)(parameters)

    def split(self, text: str) -> list[str]:
        sentences = []
        for paragraph in text.split("\n"):
            for piece in paragraph_pieces(paragraph):
                sentences.extend(s for s in (s.strip() for s in self.tokenizer.tokenize(piece)) if s)
        return sentences
