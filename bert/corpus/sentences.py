"""Sentence segmentation with NLTK's Punkt.

Punkt needs parameters (abbreviations, collocations, sentence starters). NLTK ships pretrained
English ones as the `punkt_tab` data package; when it is not installed (e.g. offline machines)
we train Punkt unsupervised on the corpus itself with `PunktTrainer`, save the parameters as a
JSON file next to the shards, and load them from there in every worker.

Unsupervised training learns the abbreviations that are frequent in its sample, but on a small
or unusual corpus it can miss common ones ("Dr." is also often the last word of a sentence in a
story, so Punkt may not trust it). We therefore add a curated list of English abbreviations that
practically never end a sentence (COMMON_ABBREVIATIONS) to whatever training learns.
"""

import json
import unicodedata
from collections.abc import Iterable
from pathlib import Path

from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer, PunktTokenizer, PunktTrainer

from bert.errors import UserError

# Lower-case and without the final period, as Punkt stores them ("u.s" is "U.S."). Words that can
# also end a sentence as ordinary words ("no", "sun", "wed", "mar") are deliberately left out.
COMMON_ABBREVIATIONS = frozenset(
    [
        "mr",
        "mrs",
        "ms",
        "dr",
        "prof",
        "sr",
        "jr",
        "st",
        "mt",
        "ft",
        "rev",
        "hon",
        "gen",
        "col",
        "lt",
        "sgt",
        "capt",
        "cmdr",
        "adm",
        "gov",
        "sen",
        "rep",
        "pres",
        "e.g",
        "i.e",
        "cf",
        "vs",
        "viz",
        "approx",
        "u.s",
        "u.k",
        "u.n",
        "a.k.a",
        "fig",
        "figs",
        "vol",
        "vols",
        "pp",
        "dept",
        "jan",
        "feb",
        "apr",
        "jul",
        "aug",
        "sep",
        "sept",
        "oct",
        "nov",
        "dec",
    ]
)
PUNKT_FILE = "punkt_params.json"
DEFAULT_TRAINING_CHARS = 20_000_000


def normalize(text: str) -> str:
    """NFC-normalise and collapse every run of whitespace to one space (non-ASCII is kept)."""
    return " ".join(unicodedata.normalize("NFC", text).split())


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
        text = "\n".join(normalize(paragraph) for paragraph in text.split("\n"))
        trainer.train(text, finalize=False)
        used += len(text)
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


class SentenceSplitter:
    """Splits a document (paragraphs separated by "\n") into normalised sentences."""

    def __init__(self, parameters: PunktParameters):
        self.tokenizer = PunktSentenceTokenizer(parameters)

    def split(self, text: str) -> list[str]:
        sentences = []
        for paragraph in text.split("\n"):
            paragraph = normalize(paragraph)
            if paragraph:
                sentences.extend(s for s in (s.strip() for s in self.tokenizer.tokenize(paragraph)) if s)
        return sentences
