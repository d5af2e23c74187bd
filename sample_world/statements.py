"""Facts as sentences in the world's own words, for the fine-tuning sets (SWAG, GLUE).

A Statement is one sentence about an entity with the exact span of every fact of that entity it
states, so a set can put another entity's value in one span (a false ending, a contradiction) and
leave the rest of the sentence as it was. Each fact has two phrasings, because two sources
already write it: the article (`wiki`: its prose paragraphs, split into sentences) and the books
(`book`: books.RECOLLECTION for a person, books.other_chapter for anything else). Paraphrase
pairs pair the two; nothing here writes a third way to state a fact."""

from __future__ import annotations

import dataclasses
import random
import re
from dataclasses import dataclass

from sample_world.articles import Article
from sample_world.books import RECOLLECTION, other_chapter
from sample_world.markup import an
from sample_world.squad import CLASS_OF
from sample_world.world import Entity, World

KINDS = {  # kind -> the World attribute listing its entities
    "person": "people",
    "town": "towns",
    "organisation": "organisations",
    "university": "universities",
    "event": "events",
    "country": "countries",
}
NO_BREAK_AFTER = {"Dr.", "Mr.", "Mrs.", "St.", "Mt."}  # a name follows: "St. Aldric", "Dr. Otto Kirsch"
# Facts the books recall together, as the articles state them ("had finished it in 1886" needs its "it").
PERSON_GROUPS = [
    ("birth_year", "birthplace"),
    ("birth_year", "occupation", "death_year"),
    ("birth_year", "occupation"),  # the lead of someone living
    ("field", "university"),
    ("spouse", "marriage_year"),
    ("work", "work_year"),
    ("award", "award_year"),
    ("death_year", "death_place"),
]
NEEDS = {"work_year": "work", "award_year": "award"}  # a recollected clause that refers back ("it")
NEAREST_YEARS = 8  # a wrong year comes from the 8 nearest other values, so it stays plausible


@dataclass(frozen=True)
class Statement:
    text: str
    subject: Entity
    facts: tuple[tuple[str, int, str], ...]  # (relation, start, value) of each subject fact stated
    source: str  # "wiki" (the article's prose) or "book" (the books' retelling)
    paragraph: int = -1  # the article paragraph it comes from (wiki)

    @property
    def values(self) -> dict[str, str]:
        return {relation: value for relation, _, value in self.facts}

    def replace(self, start: int, end: int, new: str) -> Statement:
        """text[start:end] becomes `new`; the spans after it move; a span replaced whole takes `new`."""
        moved = []
        for relation, s, value in self.facts:
            if s >= end:
                moved.append((relation, s + len(new) - (end - start), value))
            elif s + len(value) <= start:
                moved.append((relation, s, value))
            elif (s, s + len(value)) == (start, end):
                moved.append((relation, s, new))
            else:
                raise ValueError(f"{self.text!r}: {start}:{end} cuts the span of {relation}")
        return dataclasses.replace(self, text=self.text[:start] + new + self.text[end:], facts=tuple(moved))

    def with_value(self, relation: str, value: str) -> Statement:
        """The same sentence stating `value` for `relation` ("worked as an engineer", not "a engineer")."""
        _, start, old = next(f for f in self.facts if f[0] == relation)
        out = self.replace(start, start + len(old), value)
        end = start + len(value)
        if value.endswith(".") and out.text[end : end + 1] == ".":
            out = out.replace(end, end + 1, "")  # "... by Emil Quennell Jr." ends in one full stop
        elif old.endswith(".") and start + len(old) == len(self.text) and not value.endswith("."):
            out = out.replace(end, end, ".")  # and "... by Henrik Brückner Jr." needs one after a swap
        article = re.search(r"\b(an?) $", out.text[:start])
        if article:
            out = out.replace(article.start(1), article.end(1), an(value).split(" ")[0])
        return out


def split_sentences(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence: a break is [.?!] and a space before a capital or a quote,
    unless the word is a title (Dr., St., Mt.); "Jr." and "U.S." end a sentence only before a
    capital ("Henrik Brückner Jr. led it.")."""
    bounds, start = [], 0
    for m in re.finditer(r"[.?!]\"? ", text):
        following = text[m.end() : m.end() + 1]
        word = text[start : m.start() + 1].rsplit(" ", 1)[-1]
        if (following.isupper() or following == '"') and word not in NO_BREAK_AFTER:
            bounds.append((start, m.end() - 1))
            start = m.end()
    bounds.append((start, len(text)))
    return bounds


def tidy(st: Statement) -> Statement:
    """Without quotation marks (work titles, mottos) and non-breaking spaces, which tab-separated
    readers and tokenisers trip over; the words, and so the facts, stay."""
    for i in reversed(range(len(st.text))):
        if st.text[i] == '"':
            st = st.replace(i, i + 1, "")
        elif st.text[i] == "\u00a0":
            st = st.replace(i, i + 1, " ")
    return st


def wiki_statements(article: Article) -> list[Statement]:
    """Every sentence of the article's prose, in order, with the subject's facts it states."""
    e, out = article.entity, []
    for p_index, (text, spans) in enumerate(article.paragraphs):
        for start, end in split_sentences(text):
            facts = tuple(
                (relation, s - start, value)
                for (key, relation), s, value in spans
                if key == e.key and start <= s < end
            )
            out.append(tidy(Statement(text[start:end], e, facts, "wiki", p_index)))
    return out


def recollection(p: Entity, relations: tuple[str, ...]) -> Statement:
    """A person as the books recall them (books.RECOLLECTION, joined as books.recollection joins
    it): "Åsa Lindqvist was born in 1857, worked as a painter and died in 1928."."""
    clauses = [RECOLLECTION[r].replace("{name} ", "").replace('"', "") for r in relations]
    text, facts = p.title + " ", []
    for i, (relation, clause) in enumerate(zip(relations, clauses)):
        if i:
            text += " and " if i == len(relations) - 1 else ", "
        value = p.facts[relation]
        before, after = re.split(r"\{(?:v|an_v)\}", clause)
        if "{an_v}" in clause:
            before += an(value).split(" ")[0] + " "
        text += before
        facts.append((relation, len(text), value))
        text += value + after
    return Statement(text + ".", p, tuple(facts), "book")


def _find_facts(e: Entity, sentence: str) -> tuple[tuple[str, int, str], ...] | None:
    """The subject's facts a book sentence states, by their values; None when one is ambiguous."""
    masked = sentence.replace(e.title, "\0" * len(e.title))  # "Treaty of Ærøby" does not state its place
    facts = []
    for relation, value in e.facts.items():
        found = [m.start() for m in re.finditer(rf"(?<!\w){re.escape(value)}(?!\w)", masked)]
        if len(found) > 1:
            return None
        if found:
            facts.append((relation, found[0], value))
    facts.sort(key=lambda f: f[1])
    if any(a[1] + len(a[2]) > b[1] for a, b in zip(facts, facts[1:])):
        return None
    return tuple(facts)


def book_statements(w: World, e: Entity) -> list[Statement]:
    """The books' phrasing of `e`'s facts: a person's recollection, one fact or one natural group
    at a time; for anything else, the sentences of its chapter (books.other_chapter, without the
    narrative that pads it and without dialogue), with the facts found by their values."""
    if e.kind == "person":
        singles = [(r,) if r not in NEEDS else (NEEDS[r], r) for r in e.facts if r not in NEEDS.values()]
        groups = [g for g in PERSON_GROUPS if all(r in e.facts for r in g)]
        # RECOLLECTION's order is the books' order of the facts
        order = list(RECOLLECTION)
        seen, out = set(), []
        for group in singles + groups:
            group = tuple(sorted(group, key=order.index))
            if group not in seen:
                seen.add(group)
                out.append(recollection(e, group))
        return out
    out = []
    for line in other_chapter(w, e, None, lambda town, k: ""):  # other kinds' chapters draw nothing
        line = line.strip()
        for start, end in split_sentences(line):
            sentence = line[start:end]
            if sentence.startswith('"'):
                continue  # dialogue: "I counted them myself," ...
            facts = _find_facts(e, sentence.replace('"', ""))
            named = facts and standalone(Statement(sentence.replace('"', ""), e, facts, "book"))
            if named:
                out.append(named)  # "It was known for lacework." names its town
    return out


def the(e: Entity) -> str:
    """How a sentence names `e`: "the Treaty of Ærøby", but "St. Aldric" and "Zoë Ångström"."""
    return e.title if e.kind in ("person", "town", "country") else "the " + e.title


def possessive(name: str) -> str:
    return name + ("'" if name.endswith("s") else "'s")


def standalone(st: Statement) -> Statement | None:
    """The sentence understood out of its paragraph: its first pronoun ("She", "Its", "the town")
    becomes the subject's name, a surname the full name; None if nothing refers to the subject."""
    e = st.subject
    if e.title in st.text:
        return st
    if e.kind == "person" and st.text.startswith(e.attrs["surname"] + " "):
        return st.replace(0, len(e.attrs["surname"]), e.title)
    pattern = (
        r"\b(?:[Hh]e|[Ss]he|[Hh]is|[Hh]er)\b"
        if e.kind == "person"
        else r"\b(?:[Ii]ts?|[Tt]he (?:town|firm|university))\b"
    )
    m = re.search(pattern, st.text)
    if m:
        name = the(e)
        if m.group().lower() in ("its", "his", "her"):
            name = possessive(name)
        if m.start() == 0:
            name = name[0].upper() + name[1:]
        return st.replace(m.start(), m.end(), name)
    if e.kind == "event" and st.text.endswith("."):  # "Contemporary reports counted 3,210 visitors."
        return st.replace(len(st.text) - 1, len(st.text), f" during {the(e)}.")
    return None


def peers(w: World, e: Entity) -> list[Entity]:
    return [x for x in getattr(w, KINDS[e.kind]) if x is not e]


def other_values(w: World, e: Entity, relation: str) -> list[str]:
    """What `relation` is for other entities of `e`'s kind and not for `e`: the wrong answers a
    set offers. Years come nearest first, so a wrong year is as plausible as the right one."""
    own = e.facts[relation]
    values = sorted({x.facts[relation] for x in peers(w, e) if relation in x.facts} - {own, e.title})
    if CLASS_OF.get(relation) == "year":
        values.sort(key=lambda v: (abs(int(v) - int(own)), v))
        values = values[:NEAREST_YEARS]
    return values


def can_swap(w: World, e: Entity, relation: str, n: int = 1) -> bool:
    """Whether a set may state another value for `relation`: not when the name holds the value
    (the "Treaty of Ærøby" in "Ærøby", the "Expedition of 1936" in 1936) and only with `n` to pick."""
    return e.facts[relation] not in e.title and len(other_values(w, e, relation)) >= n


def wrong_value(w: World, e: Entity, relation: str, rng: random.Random) -> str:
    return rng.choice(other_values(w, e, relation))
