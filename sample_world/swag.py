"""SWAG, as rowanz/swagaf's data/train.csv and val.csv: a context sentence (sent1), the first
words of the next sentence (sent2) and four endings, one of them the true continuation.

Both sentences come from an article's prose: sent1 is a sentence, the next one states a fact of the
article's subject after its first words ("She" / "studied fine art at the Royal Academy of
Elwick, ..."). The true ending is the article's own text; each false ending is the same text with
that fact's value replaced by the value the same relation has for another entity of the kind (for
a year, a neighbouring one), and the context never states the value. The four endings are one
template, so neither length nor style tells them apart: only knowing the world does. Val is about
the held-out entities, as SQuAD dev is."""

import csv
import io
import random
import re

from sample_world.articles import Article
from sample_world.names import slugify
from sample_world.squad import CLASS_OF
from sample_world.statements import Statement, can_swap, other_values, peers, wiki_statements
from sample_world.world import Entity, World

SWAG_FILES = {"train": "train.csv", "val": "val.csv"}
SWAG_SIZES = {"train": 600, "val": 200}
HEADER = ",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label"
GEN_SHARE = 0.2  # swagaf marks some gold endings "gen" (rewritten by annotators); nothing reads it
LEAD_IN_WORDS = 6  # sent2 ends at the first mention of the subject among a sentence's first words


def lead_in(st: Statement) -> int | None:
    """Where sent2 ends: after the first mention of the subject ("She", "Åsa Lindqvist",
    "In 1881, she", "The town"), or after the first two words when there is none."""
    e = st.subject
    names = [re.escape(e.title)] + ([re.escape(e.attrs["surname"])] if e.kind == "person" else [])
    pronouns = (
        r"[Hh]e|[Ss]he|[Hh]is|[Hh]er" if e.kind == "person" else r"[Ii]ts?|[Tt]he (?:town|firm|university)"
    )
    for pattern in ("|".join(names), rf"\b(?:{pronouns})\b"):  # a name before a pronoun
        m = re.search(rf"(?:{pattern})\S*", st.text)
        if m and len(st.text[: m.start()].split()) < LEAD_IN_WORDS:
            return m.end()
    words = st.text.split(" ")
    return len(" ".join(words[:2])) if len(words) > 3 else None


def candidates(w: World, articles: list[Article]) -> dict[str, list[tuple]]:
    """(entity, sentence index, context, sentence, sent2 end, relation) for every fact a sentence
    states after its lead-in that three other entities give other values for."""
    found = {"train": [], "val": []}
    for article in articles:
        e = article.entity
        if e.kind == "country":
            continue  # too few to hold out, as in SQuAD
        sentences = wiki_statements(article)
        for i in range(1, len(sentences)):
            st = sentences[i]
            cut = lead_in(st)
            if cut is None:
                continue
            for relation, start, value in st.facts:
                # the context must not give the answer away ("... whom she had met in Belfield.")
                if start > cut and can_swap(w, e, relation, 3) and value not in sentences[i - 1].text:
                    found["val" if e.dev else "train"].append((e, i, sentences[i - 1], st, cut, relation))
    return found


def false_values(w: World, e: Entity, relation: str, rng: random.Random) -> list[str]:
    """Three other entities' values. Years are four neighbours in the sorted years of the relation
    with the true one at a random place among them: the nearest years alone would put the true one
    in the middle, which a model could learn instead of the world."""
    if CLASS_OF.get(relation) != "year":
        return rng.sample(other_values(w, e, relation), 3)
    own = e.facts[relation]
    years = sorted({x.facts[relation] for x in peers(w, e) if relation in x.facts} | {own}, key=int)
    i = years.index(own)
    start = rng.choice([s for s in range(i - 3, i + 1) if s >= 0 and s + 4 <= len(years)])
    return [y for y in years[start : start + 4] if y != own]


def swag_row(w: World, candidate: tuple, label: int, rng: random.Random) -> list[str]:
    """video-id .. label of one row: the true ending at `label`, three wrong values around it."""
    e, index, context, st, cut, relation = candidate
    endings = [st.with_value(relation, v).text[cut + 1 :] for v in false_values(w, e, relation, rng)]
    endings.insert(label, st.text[cut + 1 :])
    sent2 = st.text[:cut]
    gold_source = "gen" if rng.random() < GEN_SHARE else "gold"
    start = [f"samplewiki_{slugify(e.title)}", str(index), f"{context.text} {sent2}", context.text, sent2]
    return start + [gold_source, *endings, str(label)]


def build_swag(w: World, articles: list[Article], rng: random.Random) -> dict[str, list[list[str]]]:
    """{split: rows} without the header; labels 0..3 equally often, in a seeded order."""
    slugs = [slugify(e.title) for e in w.all()]
    assert len(set(slugs)) == len(slugs), "video-ids must name one entity each"
    rows = {}
    for split, pool in candidates(w, articles).items():
        rng.shuffle(pool)
        n = min(SWAG_SIZES[split], len(pool))
        labels = [i % 4 for i in range(n)]
        rng.shuffle(labels)
        rows[split] = [[str(k)] + swag_row(w, pool[k], labels[k], rng) for k in range(n)]
    return rows


def swag_csv(rows: list[list[str]]) -> bytes:
    """The csv module's default dialect (minimal quoting), as pandas wrote swagaf's files."""
    buffer = io.StringIO()
    buffer.write(HEADER + "\n")  # the first column, the row index, is unnamed
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return buffer.getvalue().encode("utf-8")
