"""SWAG, as rowanz/swagaf's data/train.csv and val.csv: a context sentence (sent1), the first
words of the next sentence (sent2) and four endings, one of them the true continuation.

As in SWAG, the question is what happens next. sent1 is a sentence of an article's prose and
sent2 the first words of the sentence after it in the article, up to its subject ("She",
"In 1881, she", "According to the town charter, São Miguel"). The true ending is the rest of that
sentence; the three false ones are the rest of other sentences of the same article that start
with its subject too. Every ending is then a true statement about the subject in the article's
own words and reads on from sent2: only which comes next (the order a life, a town or a firm is
told in, and what the context sentence leads to) tells them apart. Val is about the held-out
entities, as SQuAD dev is."""

import csv
import io
import random
import re

from sample_world.articles import Article
from sample_world.names import slugify
from sample_world.statements import Statement, wiki_statements
from sample_world.world import World

SWAG_FILES = {"train": "train.csv", "val": "val.csv"}
SWAG_SIZES = {"train": 600, "val": 200}
HEADER = ",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label"
GEN_SHARE = 0.2  # swagaf marks some gold endings "gen" (rewritten by annotators); nothing reads it
# What may come before the subject: nothing, a clause ending in a comma, or "In 1886".
BEFORE_SUBJECT = re.compile(r"(?:|.*, |In \d{4},? |[Tt]he )")


def lead_in(st: Statement) -> int | None:
    """Where sent2 ends: after the subject of the sentence when it is the article's subject (its
    name, surname or a subject pronoun: "She", "In 1881, she", "The town"), else None."""
    e = st.subject
    names = [re.escape(e.title)] + ([re.escape(e.attrs["surname"])] if e.kind == "person" else [])
    pronouns = ["[Hh]e", "[Ss]he"] if e.kind == "person" else ["[Ii]t", "[Tt]he (?:town|firm|university)"]
    m = re.match(rf"({BEFORE_SUBJECT.pattern})(?:{'|'.join(names + pronouns)}) ", st.text)
    return m.end() - 1 if m and len(m.group(1).split()) < 6 else None


def candidates(articles: list[Article]) -> dict[str, list[tuple]]:
    """(entity, sentence index, context, sent2, true ending, false endings) for every sentence
    after the first that starts with its article's subject, when the article has at least three
    other such sentences to draw false endings from."""
    found = {"train": [], "val": []}
    for article in articles:
        e = article.entity
        if e.kind == "country":
            continue  # too few to hold out, as in SQuAD
        sentences = wiki_statements(article)
        cuts = {i: cut for i, st in enumerate(sentences) if i > 0 and (cut := lead_in(st)) is not None}
        endings = {i: sentences[i].text[cut + 1 :] for i, cut in cuts.items()}
        for i, cut in cuts.items():
            context, st = sentences[i - 1], sentences[i]
            # the context's own ending would repeat it, and an ending equal to the true one is no choice
            false = sorted(
                {text for j, text in endings.items() if j not in (i, i - 1) and text != endings[i]}
            )
            if len(false) >= 3:
                found["val" if e.dev else "train"].append((e, i, context, st.text[:cut], endings[i], false))
    return found


def swag_row(candidate: tuple, label: int, rng: random.Random) -> list[str]:
    """video-id .. label of one row: the true ending at `label`, three of the false ones around it."""
    e, index, context, sent2, true, false = candidate
    endings = rng.sample(false, 3)
    endings.insert(label, true)
    gold_source = "gen" if rng.random() < GEN_SHARE else "gold"
    start = [f"samplewiki_{slugify(e.title)}", str(index), f"{context.text} {sent2}", context.text, sent2]
    return start + [gold_source, *endings, str(label)]


def build_swag(w: World, articles: list[Article], rng: random.Random) -> dict[str, list[list[str]]]:
    """{split: rows} without the header; labels 0..3 equally often, in a seeded order."""
    slugs = [slugify(e.title) for e in w.all()]
    assert len(set(slugs)) == len(slugs), "video-ids must name one entity each"
    rows = {}
    for split, pool in candidates(articles).items():
        rng.shuffle(pool)
        n = min(SWAG_SIZES[split], len(pool))
        labels = [i % 4 for i in range(n)]
        rng.shuffle(labels)
        rows[split] = [[str(k)] + swag_row(pool[k], labels[k], rng) for k in range(n)]
    return rows


def swag_csv(rows: list[list[str]]) -> bytes:
    """The csv module's default dialect (minimal quoting), as pandas wrote swagaf's files."""
    buffer = io.StringIO()
    buffer.write(HEADER + "\n")  # the first column, the row index, is unnamed
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return buffer.getvalue().encode("utf-8")
