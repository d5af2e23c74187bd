"""How documents are cleaned across corpora (`CleanSettings`, with `NearSettings` for near
duplicates): params.yaml's `clean` block is this type, each field's range and the rules across
fields here. A module of its own, so that every stage can read params.yaml's schema without
importing (or rerunning on an edit of) the cleaning code."""

from dataclasses import dataclass
from typing import Annotated, Literal

from bert.errors import SettingsError
from bert.ranges import Count, Range, Seed


@dataclass(frozen=True)
class NearSettings:
    enabled: bool
    # Verified Jaccard similarity of two documents' word-shingle sets at or above which they are duplicates
    threshold: Annotated[float, Range(0, 1, low_open=True)]
    ngram: Count  # words per shingle
    num_perm: Annotated[int, Range(low=2)]  # MinHash values per document
    bands: Count  # LSH bands; must divide num_perm (rows per band = num_perm / bands)

    def __post_init__(self) -> None:
        if self.num_perm % self.bands:
            raise SettingsError(
                "near-duplicate settings",
                lambda prefix: (
                    f"{prefix}bands {self.bands} does not divide {prefix}num_perm {self.num_perm}; "
                    "choose bands that divide it (each band holds num_perm / bands MinHash values)"
                ),
            )


@dataclass(frozen=True)
class CleanSettings:
    """How documents are cleaned across corpora: params.yaml's `clean` block, with the
    vocabulary's case and the pipeline's seed."""

    exact: bool  # remove documents whose normalised text equals an earlier one's
    near: NearSettings
    lower_case: bool  # texts compared lower-cased, as the vocabulary reads them
    seed: Seed  # of the MinHash permutations
    # none | report (a report, by another stage, off the pretraining path) | remove (documents sharing
    # an n-gram with an evaluation set; pretraining then depends on the evaluation sets)
    decontaminate: Literal["none", "report", "remove"]
    contamination_ngram: Count  # words per n-gram shared with an evaluation text (GPT-3: 13)
    # A line (paragraph) found in at least this many distinct texts is boilerplate, removed from all
    # documents before anything is compared (a document left empty is removed); 0: none is.
    boilerplate_min_documents: Annotated[int, Range(low=0, meaning="0 = off, else at least 2")]

    def __post_init__(self) -> None:
        if self.boilerplate_min_documents == 1:
            raise SettingsError(
                "clean settings",
                lambda prefix: (
                    f"{prefix}boilerplate_min_documents is 1, which would remove every line; "
                    "use 0 (off) or at least 2"
                ),
            )

    @property
    def removes_contaminated(self) -> bool:
        return self.decontaminate == "remove"
