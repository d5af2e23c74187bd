"""Sentence splitting with Punkt trained on the corpus: abbreviations and initials before a
capitalised word must not end a sentence; real sentence ends after them must."""

import pyarrow.parquet as pq
import pytest

from bert.corpus import sentences as punkt
from bert.corpus.wikipedia import extract_wikipedia

# Enough text for Punkt to learn how words are capitalised: "census", "circuit", "an", "first"
# and "s" are seen in lower case, the way a small real sample misleads Punkt into splitting
# "the U.S. Census Bureau".
TRAINING = """The census of 1900 counted every farm in the county. In the next decade the census was \
taken again, and the circuit court used it.
The route along the river was paved early. It was the first paved road in the county. First the \
farmers objected; then they used the road every day. He wrote the letters x and s on the map.
An old mill stood by the bridge. An inn stood there too, with an orchard. In the winter the river \
froze. The mill closed in 1950 and was sold to a company.
Many people came to the town. They built houses by the road. He was a farmer, and he sold grain at \
the market. She kept the accounts for an uncle."""

# One paragraph each, and the sentences it must split into.
CASES = [
    (
        "In 2002, the 11th U.S. Circuit Court ordered the statue removed. It stayed.",
        ["In 2002, the 11th U.S. Circuit Court ordered the statue removed.", "It stayed."],
    ),
    (
        "According to the U.S. Census Bureau, the county grew. It grew again in 1910.",
        ["According to the U.S. Census Bureau, the county grew.", "It grew again in 1910."],
    ),
    (
        "The school was founded by A. S. Neill in 1921. The school of A.S. Neill is old.",
        ["The school was founded by A. S. Neill in 1921.", "The school of A.S. Neill is old."],
    ),
    (
        "Gen. Pope met Dr. Hale at St. Cloud, Minnesota. Rev. Peter Cartwright was there.",
        ["Gen. Pope met Dr. Hale at St. Cloud, Minnesota.", "Rev. Peter Cartwright was there."],
    ),
    (
        "Emissions in CO2-eq. units fell, e.g. Moon dust, approx. 5 tonnes. See Fig. 3 and No. 5 here.",
        ["Emissions in CO2-eq. units fell, e.g. Moon dust, approx. 5 tonnes.", "See Fig. 3 and No. 5 here."],
    ),
    # Real sentence ends after abbreviation-like words.
    (
        "The name is common in the U.S. An estimated 26 states use it.",
        ["The name is common in the U.S.", "An estimated 26 states use it."],
    ),
    ("They sold pens, paper, etc. The shop closed.", ["They sold pens, paper, etc.", "The shop closed."]),
    (
        "She moved to Washington, D.C. In 1990 she left.",
        ["She moved to Washington, D.C.", "In 1990 she left."],
    ),
    (
        "It was the letter A. First came the Greek form.",
        ["It was the letter A.", "First came the Greek form."],
    ),
    (
        "The road reached Main St. The mill stood there.",
        ["The road reached Main St.", "The mill stood there."],
    ),
]


@pytest.fixture(scope="module")
def trained():
    return punkt.train_parameters([TRAINING])[0]


@pytest.mark.parametrize("paragraph,expected", CASES)
def test_curated_punkt_on_hand_written_sentences(trained, paragraph, expected):
    assert punkt.SentenceSplitter(trained, curated=True).split(paragraph) == expected


def test_plain_trained_punkt_splits_where_the_curated_rules_do_not(trained):
    # Why the rules exist: the same parameters without them split inside the names.
    plain = punkt.SentenceSplitter(trained, curated=False)
    assert plain.split(CASES[0][0])[0] == "In 2002, the 11th U.S."
    assert plain.split(CASES[2][0])[0] == "The school was founded by A."


def test_saved_parameters_split_the_same(trained, tmp_path):
    punkt.save_parameters(trained, tmp_path / "p.json")
    loaded = punkt.SentenceSplitter(punkt.load_parameters(tmp_path / "p.json"), curated=True)
    in_memory = punkt.SentenceSplitter(trained, curated=True)
    text = "\n".join(paragraph for paragraph, _ in CASES)
    assert loaded.split(text) == in_memory.split(text)


# Boundaries in the real articles of ../shared/data/enwiki-sample-70pages.xml.bz2, checked by
# reading them: the text holds "left right" at "left|right"; True where a sentence really ends there.
# Still wrong, and out of these rules' reach: 'In "What Is Property?"|(1840), Proudhon' is split
# (Punkt always ends a sentence at '?"'); "Perry O. Hooper Sr.|Hornsby sued" and
# 'in the world..."|Lincoln's attacks' are not split (a name after "Sr." or an ellipsis).
REAL_BOUNDARIES = [
    # Split by Punkt trained on the sample before the curated rules.
    ("In a similar token, A.|S. Neill founded", False),
    ('A follow-up study found that "CO2-eq.|emissions associated', False),
    ("In 2002, the 11th U.S.|Circuit Court ordered", False),
    ("According to the U.S.|Census Bureau, the state", False),
    ("According to U.S.|Census data (2000)", False),
    ("pass through the state, such as U.S.|Route 11 (US-11)", False),
    ("offered the same at St.|Cloud, Minnesota.", False),
    # Right before as well.
    ("the advice of Gen.|Winfield Scott", False),
    ("while Gen.|Pope ordered", False),
    ("under Rep.|Thaddeus Stevens, Sen.|Charles Sumner", False),
    ("political opponent, Rev.|Peter Cartwright.", False),
    ("burned alive in St.|Louis, Missouri.", False),
    ("anarchists formed the St.|Imier International.", False),
    ("In 1954, the U.S.|Supreme Court ruled", False),
    ("a planetary target (e.g.|Moon, asteroid, etc.) and", False),
    ("the hero's death (i.e.|the", False),
    ("600,000 whites vs.|520,000 African Americans", False),
    ("John Patrick Diggins, Harry V.|Jaffa, Vernon Burton", False),
    ("A.|John Simmons and Leslie", False),
    ("circuitous route from Washington D.C.|to Springfield", False),
    ("Hoar Construction, and B.L.|Harbert International", False),
    ("Oliver Wendell Holmes Jr.|shouted at him", False),
    ('cases of "Baker v.|Carr" (1962)', False),
    ("opening of the George C.|Marshall Space Flight Center", False),
    ("languages is common in the U.S.|An estimated 26 states", True),
    ("poverty rate among states in the U.S.|In 2017, United Nations", True),
    ("Jubal Early raided Washington, D.C.|Legend has it", True),
    ("many variant forms of the letter A.|First was the monumental", True),
    ("soon executed by Emperor Kavad I.|In Basra", True),
    ("Eric Foner, and Herman J. Belz.|Lincoln called", True),
]


def observed_splits(documents: list[list[str]], boundary: str) -> list[bool]:
    """Every place `boundary` ("left|right", possibly several "|") occurs: whether each "|" is a split."""
    pieces = boundary.split("|")
    found = []
    for sentences in documents:
        text = " ".join(sentences)
        ends, position = set(), 0
        for sentence in sentences:
            position += len(sentence)
            ends.add(position)
            position += 1
        start = text.find(" ".join(pieces))
        while start >= 0:
            position = start
            for piece in pieces[:-1]:
                position += len(piece)
                found.append(position in ends)
                position += 1
            start = text.find(" ".join(pieces), start + 1)
    return found


def test_real_articles_split_right_at_hand_checked_boundaries(shared_data, tmp_path):
    extract_wikipedia(
        shared_data / "enwiki-sample-70pages.xml.bz2", tmp_path / "docs", "wikipedia", compute=1
    )
    texts = [row["text"] for row in pq.read_table(tmp_path / "docs").to_pylist()]
    parameters, _ = punkt.train_parameters(texts)
    splitter = punkt.SentenceSplitter(parameters, curated=True)
    documents = [splitter.split(text) for text in texts]
    assert documents == [splitter.split(text) for text in texts]  # deterministic

    wrong = []
    for boundary, is_sentence_end in REAL_BOUNDARIES:
        found = observed_splits(documents, boundary)
        assert found, f"{boundary!r} is not in the extracted articles any more"
        wrong += [boundary for split in found if split != is_sentence_end]
    assert wrong == []


# ---- paragraphs too long for Punkt in one piece (a table dump, a base64 blob on one line) ---------


def _long_prose(sentences: int) -> str:
    return " ".join(
        f"The mill number {i} stood by the river and it was sold in {1800 + i % 200}."
        for i in range(sentences)
    )


def test_a_paragraph_within_the_limit_is_one_piece():
    assert punkt.paragraph_pieces(CASES[0][0]) == [CASES[0][0]]
    assert punkt.paragraph_pieces("") == []


def test_long_paragraphs_are_cut_after_a_sentence_end_else_a_space_else_anywhere():
    prose = _long_prose(200)
    pieces = punkt.paragraph_pieces(prose, limit=1000)
    assert all(len(piece) <= 1000 for piece in pieces)
    assert " ".join(pieces) == prose
    assert all(piece.endswith(".") for piece in pieces)  # every cut falls after a sentence
    words = " ".join(["riverbank"] * 500)  # no sentence end at all
    pieces = punkt.paragraph_pieces(words, limit=1000)
    assert " ".join(pieces) == words  # cut at spaces, never inside a word
    assert all(980 <= len(piece) <= 1000 for piece in pieces[:-1])  # within a word of the limit
    blob = "x" * 2500  # no space either
    assert punkt.paragraph_pieces(blob, limit=1000) == ["x" * 1000, "x" * 1000, "x" * 500]


def test_punkt_never_sees_more_than_the_limit_at_once(trained, monkeypatch):
    # NLTK limits every Punkt regex call to 5 s of wall clock and scans a whole paragraph per call:
    # one 200 MB line raised TimeoutError at 4 GB of RSS. Scaled down here: the limit is 10,000
    # characters and the line 1.3 MB; Punkt must only ever be handed pieces within the limit.
    monkeypatch.setattr(punkt, "MAX_PIECE_CHARS", 10_000)
    seen = []
    for cls, method in [(punkt.CuratedPunkt, "tokenize"), (punkt.PunktTrainer, "train")]:
        original = getattr(cls, method)

        def spy(self, text, *args, _original=original, **kwargs):
            seen.append(len(text))
            return _original(self, text, *args, **kwargs)

        monkeypatch.setattr(cls, method, spy)
    prose = _long_prose(20_000)
    blob = "QUJD+/9.x" * 3_000  # 27 KB without a space
    sentences = punkt.SentenceSplitter(trained, curated=True).split(prose + "\n" + blob)
    assert len(sentences) >= 20_000
    assert "".join(sentences).replace(" ", "") == (prose + blob).replace(" ", "")
    parameters, used = punkt.train_parameters([prose + "\n" + blob])
    # every character was trained on (less the spaces at the cuts)
    assert len(prose) + len(blob) - 1000 < used <= len(prose) + len(blob) + 1
    assert max(seen) <= 10_000 and len(seen) > 2 * (len(prose) + len(blob)) // 10_000
