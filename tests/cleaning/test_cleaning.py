"""Corpus cleaning (bert.cleaning) on a corpus of planted pairs at known Jaccard similarity
(bench/cleaning.py): recall of near duplicates at or above the threshold, nothing removed well
below it, exact duplicates always; Chinese and Japanese compared by characters; the same bytes on
1 and 2 local workers and on a Dask LocalCluster; decontamination; boilerplate lines counted over
distinct texts; the clean stage's figures and one-line refusals of bad params."""

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from bench.cleaning import DEFAULTS, planted_corpus, removed_documents, score, settings, write_tables
from bert.cleaning import contamination
from bert.cleaning.dedup import band_keys, clean_corpora
from bert.cleaning.settings import CleanSettings, NearSettings
from bert.cleaning.text import jaccard, normalise, text_digest, text_ngrams, words
from bert.compute import Compute
from bert.corpus.documents import DocumentWriter
from bert.errors import SettingsError, UserError
from stages.common.params import load_params
from tests.support.stage_workspace import run_stage, write_params

# A 114-character Chinese document, and its copy with 2 characters changed (数百 -> 数千, 北方 -> 南方).
CHINESE = (
    "奥斯梅尔是加洛瓦河畔的一座小城，以古老的港口和石桥而闻名。十九世纪时，城里的造船厂雇用了数百名工人，"
    "他们建造的木船沿着河流把粮食运往北方的市场。一九五零年的大洪水冲毁了旧码头，市政府随后用石头重建了港口，"
    "并在河岸修建了新的仓库。"
)
CHINESE_COPY = CHINESE.replace("数百", "数千").replace("北方", "南方")
# Japanese with English words and digits among the kanji and kana.
MIXED = (
    "BERTはGoogleが2018年に発表した言語モデルで、Wikipediaと書籍のテキストで事前学習したあと、"
    "SQuADやGLUEなどのタスクに合わせて微調整される。事前学習ではマスクされた単語を周りの文脈から当てる。"
    "モデルの大きさはbaseとlargeの二種類があり、largeは24層である。"
)
MIXED_COPY = MIXED.replace("2018年", "2019年").replace("二種類", "三種類")
# The English control: 110 words, 2 of them changed in the copy.
ENGLISH = " ".join(
    f"{word}{n}" for n, word in enumerate(["harbour", "stone", "river", "market", "storm"] * 22)
)
ENGLISH_COPY = ENGLISH.replace("river12 ", "lake12 ").replace("stone81 ", "brick81 ")


def _digests(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """The planted corpus, cleaned once on one local worker: (folders, pairs, output, metrics)."""
    root = tmp_path_factory.mktemp("planted")
    corpora, pairs = planted_corpus(scale=1, seed=3)
    folders = write_tables(root / "in", corpora)
    output = root / "one"
    output.mkdir()
    result = clean_corpora(folders, output, settings(), Compute("local", 1), None, [])
    return folders, pairs, output, result


def test_planted_duplicates_are_found_and_pairs_well_below_the_threshold_are_kept(planted):
    folders, pairs, output, result = planted
    removed = removed_documents(output, folders)
    found = score(pairs, removed, DEFAULTS.threshold)
    assert found["pairs_above"] >= 12 and found["recall"] >= 0.95, found
    assert found["removed_below_0.5"] == 0 and found["exact_found"], found
    assert found["precision"] == 1.0, found  # the random documents share no shingle: only copies go
    # the copy is removed and the original (earlier in corpus order) kept, across corpora too
    assert not removed & {original for original, *_ in pairs}
    metrics = result.metrics
    assert metrics["wiki"]["exact_duplicates"] + metrics["books"]["exact_duplicates"] == 4
    assert sum(metrics[c]["documents_in"] - metrics[c]["documents_out"] for c in ("wiki", "books")) == len(
        removed
    )
    assert metrics["books"]["duplicates_of_another_corpus"] > 0
    assert not (output / ".work").exists()
    assert any(line.startswith("removed (near, Jaccard 0.") for line in result.samples)


def test_the_output_is_the_same_bytes_on_two_workers_and_on_dask(planted, tmp_path):
    folders, _, output, result = planted
    for compute in (Compute("local", 2), Compute("dask", 2)):
        again = tmp_path / compute.scheduler
        again.mkdir()
        assert clean_corpora(folders, again, settings(), compute, None, []).metrics == result.metrics
        assert _digests(again) == _digests(output), compute


def test_normalisation_makes_exact_duplicates_of_case_whitespace_and_composition():
    composed, decomposed = "Caf\u00e9 au lait", "cafe\u0301  AU\n lait "
    assert normalise(composed, True) == normalise(decomposed, True) == "café au lait"
    assert text_digest(normalise(composed, False)) != text_digest(normalise(decomposed, False))


def test_jaccard_and_band_keys():
    a = text_ngrams("one two three four five six seven", 3, True, True)
    b = text_ngrams("one two three four five six eight", 3, True, True)
    assert jaccard(a, b) == pytest.approx(4 / 6)
    assert len(text_ngrams("too short", 13, True, whole_if_shorter=False)) == 0
    signatures = np.arange(16, dtype=np.uint32).reshape(2, 8)
    keys = band_keys(np.vstack([signatures, signatures[:1]]), bands=4)
    assert keys.shape == (3, 4) and (keys[0] == keys[2]).all() and len(set(keys[0])) == 4


def test_chinese_and_japanese_are_compared_by_characters_and_mixed_texts_by_both():
    assert words("东京是日本的首都。") == list("东京是日本的首都")
    assert words("BERTは2018年に発表された") == [
        "BERT",
        "は",
        "2018",
        "年",
        "に",
        "発",
        "表",
        "さ",
        "れ",
        "た",
    ]
    assert words("한국어 문장입니다, naïve café") == [
        "한국어",
        "문장입니다",
        "naïve",
        "café",
    ]  # spaced: words
    assert len(CHINESE) == 114
    for original, copy in ((CHINESE, CHINESE_COPY), (MIXED, MIXED_COPY), (ENGLISH, ENGLISH_COPY)):
        similarity = jaccard(*(text_ngrams(text, DEFAULTS.ngram, True, True) for text in (original, copy)))
        assert DEFAULTS.threshold <= similarity < 0.9, similarity  # the clean stage's test removes each copy
    # evaluation overlap counts characters too: a question of 13 characters has an n-gram
    assert contamination.eval_ngrams({"zh": ["加洛瓦河畔的一座小城叫什么名字？"]}, 13, True)[1] == {"zh": 0}


def test_decontamination_finds_and_removes_documents_sharing_an_ngram_with_an_evaluation_text(tmp_path):
    passage = "the harbour of the old town was rebuilt in stone after the great storm of the winter"
    evaluation = {"squad": [passage, "When was it rebuilt?"], "rte": ["nothing like the corpus at all here"]}
    ngrams, too_short = contamination.eval_ngrams(evaluation, 13, True)
    assert too_short == {"squad": 1, "rte": 1}
    ngrams_file = tmp_path / "ngrams.npz"
    contamination.save_ngrams(ngrams_file, ngrams)
    (tmp_path / "in").mkdir()
    with DocumentWriter(tmp_path / "in") as writer:
        writer.add(
            "wiki",
            "1",
            "Town",
            "Intro line.\nThe Harbour of the old town was rebuilt, in stone, after the great storm of the winter.",
        )
        writer.add("wiki", "2", "Other", "A different story about fields and rivers, long and quiet.")
    report = contamination.contamination_report(
        {"wiki": tmp_path / "in"}, ngrams_file, list(ngrams), 13, True, 1
    )
    assert report["wiki"]["squad"] == {"contaminated_documents": 1, "matched_ngrams": 5}
    assert report["wiki"]["rte"] == {"contaminated_documents": 0, "matched_ngrams": 0}
    out = tmp_path / "out"
    out.mkdir()
    removing = settings()
    removing = type(removing)(**{**removing.__dict__, "decontaminate": "remove"})
    result = clean_corpora(
        {"wiki": tmp_path / "in"}, out, removing, Compute("local", 1), ngrams_file, list(ngrams)
    )
    assert result.metrics["wiki"]["documents_out"] == 1
    assert result.metrics["wiki"]["contamination_removed"]["squad"]["contaminated_documents"] == 1


@pytest.mark.parametrize(
    "changes, message",
    [
        (
            {"clean.near.threshold": 0},
            "error: params.yaml: clean.near.threshold is 0; it must be a finite number in (0, 1]",
        ),
        (
            {"clean.near.threshold": 1.5},
            "error: params.yaml: clean.near.threshold is 1.5; it must be a finite number in (0, 1]",
        ),
        (
            {"clean.near.bands": 30},
            "error: params.yaml: clean.near.bands 30 does not divide clean.near.num_perm 128; "
            "choose bands that divide it (each band holds num_perm / bands MinHash values)",
        ),
        (
            {"clean.decontaminate": False},
            "error: params.yaml: clean.decontaminate is false: the value off is now spelled none (YAML reads "
            "a bare off, as `dvc exp run -S clean.decontaminate=off` writes it, as false); write none",
        ),
        (
            {"clean.decontaminate": "off"},
            "error: params.yaml: clean.decontaminate is 'off': the value off is now spelled none (YAML reads "
            "a bare off, as `dvc exp run -S clean.decontaminate=off` writes it, as false); write none",
        ),
        (
            {"clean.boilerplate_min_documents": 1},
            "error: params.yaml: clean.boilerplate_min_documents is 1, which would remove every line; "
            "use 0 (off) or at least 2",
        ),
    ],
    ids=[
        "threshold-0",
        "threshold-above-1",
        "bands-not-dividing",
        "off-unquoted",
        "off-of-before",
        "boilerplate-1",
    ],
)
def test_a_bad_clean_param_is_one_line(tmp_path, changes, message):
    write_params(tmp_path, changes)
    with pytest.raises(UserError) as error:
        load_params(tmp_path / "params.yaml")
    assert f"error: {error.value}" == message


def test_the_clean_stage_writes_the_tables_its_figures_and_the_sample(tmp_path):
    corpora, _ = planted_corpus(scale=1, seed=5)
    # With near copies in Chinese, in Japanese mixed with English, and in English (the control).
    wiki, books = corpora[0][:300] + corpora[0][-12:], corpora[1][:300] + corpora[1][-12:]
    scripts = {f"wiki-{len(wiki) + n}": f"books-{len(books) + n}" for n in range(3)}  # original: copy
    wiki, books = wiki + [CHINESE, MIXED, ENGLISH], books + [CHINESE_COPY, MIXED_COPY, ENGLISH_COPY]
    folders = write_tables(tmp_path / "tables", [wiki, books])
    for folder, corpus in zip(folders.values(), ("wikipedia", "bookcorpus")):  # params.yaml's corpora
        (tmp_path / "data/documents").mkdir(parents=True, exist_ok=True)
        shutil.move(folder, tmp_path / "data/documents" / corpus)
    write_params(tmp_path, {"compute.num_workers": 1})
    result = run_stage(tmp_path, "stages.clean")
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads((tmp_path / "metrics/clean.json").read_text())
    assert metrics["all"]["documents_out"] < metrics["all"]["documents_in"] == 630
    assert sorted(p.name for p in (tmp_path / "data/clean").iterdir()) == ["bookcorpus", "wikipedia"]
    assert "kept: " in (tmp_path / "metrics/clean_removed.txt").read_text()
    kept = {
        corpus: set(_column(tmp_path / "data/clean" / corpus, "doc_id"))
        for corpus in ("wikipedia", "bookcorpus")
    }
    assert set(scripts) <= kept["wikipedia"] and not set(scripts.values()) & kept["bookcorpus"]


def _column(folder: Path, name: str) -> list:
    return [
        value
        for part in sorted(folder.glob("*.parquet"))
        for value in pq.read_table(part).column(name).to_pylist()
    ]


def test_boilerplate_is_counted_over_distinct_texts_and_an_emptied_document_is_dropped(tmp_path):
    """A document present twice is one text: its lines are not boilerplate (min 2), and exact
    deduplication keeps one copy whole; a document of nothing but boilerplate goes, counted."""
    footer = "Text is available under the Sample Licence; additional terms may apply."
    twice = "The harbour of Osmere was rebuilt in stone.\nIts warehouses line the river.\nA museum opened in 1990."
    documents = {
        "wikipedia": [f"Article {n} about w{n}a w{n}b w{n}c w{n}d, on its own.\n{footer}" for n in range(4)]
        + [twice, footer],
        "bookcorpus": [twice, "A book of its own, unlike any other here."],
    }
    for corpus, texts in documents.items():
        (tmp_path / "data/documents" / corpus).mkdir(parents=True)
        with DocumentWriter(tmp_path / "data/documents" / corpus) as writer:
            for n, text in enumerate(texts):
                writer.add(corpus, f"{corpus}-{n}", str(n), text)
    write_params(tmp_path, {"compute.num_workers": 1, "clean.boilerplate_min_documents": 2})
    result = run_stage(tmp_path, "stages.clean")
    assert result.returncode == 0, result.stderr[-3000:]
    texts = {corpus: _column(tmp_path / "data/clean" / corpus, "text") for corpus in documents}
    assert texts["wikipedia"] == [
        f"Article {n} about w{n}a w{n}b w{n}c w{n}d, on its own." for n in range(4)
    ] + [twice]
    assert texts["bookcorpus"] == ["A book of its own, unlike any other here."]  # its copy of `twice` removed
    metrics = json.loads((tmp_path / "metrics/clean.json").read_text())
    assert (
        metrics["wikipedia"]["emptied_by_boilerplate"] == 1
        and metrics["bookcorpus"]["emptied_by_boilerplate"] == 0
    )
    assert metrics["wikipedia"]["boilerplate_lines_removed"] == 5  # the footer, in 5 documents
    assert metrics["bookcorpus"]["exact_duplicates"] == 1
    assert metrics["all"]["documents_out"] == 6


def test_the_cleaning_settings_hold_their_rules_across_fields_used_alone():
    """The rules params.yaml's clean block is checked by live on the library's type: used without
    params.yaml, the same line names the bare fields."""
    near = NearSettings(True, 0.8, 5, 128, 32)
    with pytest.raises(SettingsError) as error:
        NearSettings(True, 0.8, 5, 128, 30)
    assert str(error.value) == (
        "near-duplicate settings: bands 30 does not divide num_perm 128; choose bands that divide it "
        "(each band holds num_perm / bands MinHash values)"
    )
    with pytest.raises(
        SettingsError, match="^clean settings: boilerplate_min_documents is 1, which would remove"
    ):
        CleanSettings(True, near, True, 1, "none", 13, 1)
    assert not CleanSettings(True, near, True, 1, "report", 13, 0).removes_contaminated


def test_boilerplate_lines_in_enough_documents_are_removed_from_all_the_same_on_two_workers(tmp_path):
    footer = "This page was last edited by the Sample Wiki team. Text is available under a licence."
    rng = np.random.default_rng(1)
    (tmp_path / "in").mkdir()
    with DocumentWriter(tmp_path / "in") as writer:
        for doc in range(40):
            body = " ".join(f"w{n}" for n in rng.integers(0, 50_000, size=60))
            shared = "A line two documents share." if doc in (3, 4) else f"Line {doc}."
            writer.add(
                "wiki", str(doc), str(doc), f"{body}\n{shared}\n{footer if doc % 4 else footer.upper()}"
            )
    boiler = settings()
    boiler = type(boiler)(**{**boiler.__dict__, "boilerplate_min_documents": 3})
    outputs = []
    for workers in (1, 2):
        out = tmp_path / f"out{workers}"
        out.mkdir()
        result = clean_corpora({"wiki": tmp_path / "in"}, out, boiler, Compute("local", workers), None, [])
        outputs.append(_digests(out))
    assert outputs[0] == outputs[1]
    assert result.metrics["wiki"]["boilerplate_lines_removed"] == 40  # the footer, in any case
    texts = pq.read_table(tmp_path / "out1" / "wiki").column("text").to_pylist()
    assert len(texts) == 40 and not any("last edited" in text.lower() for text in texts)
    assert sum("two documents share" in text for text in texts) == 2  # in 2 < 3 documents: kept
