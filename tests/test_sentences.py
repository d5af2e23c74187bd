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
        shared_data / "enwiki-sample-70pages.xml.bz2", tmp_path / "docs", processes=1, corpus="wikipedia"
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
