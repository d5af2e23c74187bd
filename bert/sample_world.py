"""The bundled sample world: a small fictional encyclopaedia, books and SQuAD sets, from one seed.

`python -m bert.sample_world --out data/sample --seed 0` invents people, places, organisations,
universities and events with consistent facts (a person is born in a town in a year, studies at a
university, marries, founds a company; an event happens in a town ...) and writes them in the
formats the real sources have, so the demo pipeline runs exactly the code a real run does:

  wikipedia/samplewiki-20260101-pages-articles.xml.bz2   MediaWiki XML export 0.11 (like enwiki)
  books/txt/<slug>.txt                                   narrative books, one paragraph a line
  books/parquet/train-00000-of-00001.parquet             the same lines, one `text` row each
  squad/v1.1/{train,dev}-v1.1.json                       SQuAD v1.1 (dev: three gold answers)
  squad/v2.0/{train,dev}-v2.0.json                       SQuAD v2.0 (a third unanswerable)

Every fact asked about in SQuAD is stated in the wiki prose and restated in the books, so a model
pretrained on them starts fine-tuning knowing the answers. Dev questions are about entities that
train questions never ask about. SQuAD contexts are the articles' prose paragraphs rendered as
wikiextractor renders them (links become their labels, ''italic'' becomes "italic", refs vanish).
Output is byte-identical for the same seed.
"""

from __future__ import annotations

import argparse
import bz2
import hashlib
import io
import json
import logging
import os
import random
import re
import sys
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

log = logging.getLogger("bert.sample_world")

DUMP_NAME = "samplewiki-20260101-pages-articles.xml.bz2"
BOOKS_PARQUET = "train-00000-of-00001.parquet"
SQUAD_FILES = {
    "v1.1": ("train-v1.1.json", "dev-v1.1.json"),
    "v2.0": ("train-v2.0.json", "dev-v2.0.json"),
}
DEV_FRACTION = 0.16
V2_ANSWERABLE_SHARE = (
    2 / 3
)  # v2.0 keeps this share of the v1.1 questions, then adds half as many unanswerable

# --------------------------------------------------------------------------------------------
# Name material. Deliberately full of diacritics so the pipeline must keep non-ASCII text intact.

FEMALE_NAMES = [
    "Zoë",
    "Åsa",
    "Renée",
    "Chloé",
    "Ingrid",
    "Maja",
    "Liv",
    "Agnieszka",
    "Inês",
    "Margit",
    "Helena",
    "Sofía",
    "Élise",
    "Britt",
    "Tove",
    "Marta",
    "Noémie",
    "Clara",
    "Greta",
    "Oona",
    "Ilse",
    "Beatriz",
    "Solveig",
    "Jadwiga",
    "Dörte",
    "Aurélie",
    "Hana",
    "Mirela",
]
MALE_NAMES = [
    "Søren",
    "Łukasz",
    "Tomás",
    "Émile",
    "Björn",
    "Mateus",
    "Otto",
    "Henrik",
    "João",
    "Aurelio",
    "Kasimir",
    "Jörg",
    "Anders",
    "Radek",
    "Félix",
    "Tobias",
    "Niels",
    "Caspar",
    "Leopold",
    "Stanisław",
    "Gustav",
    "Ivo",
    "Emil",
    "Bruno",
    "Håkon",
    "Dário",
]
SURNAMES = [
    "Ångström",
    "Nørgaard",
    "Vráblik",
    "Kowalczyk",
    "Sørensen",
    "Haldane",
    "Brückner",
    "Castellan",
    "Vellacourt",
    "Östberg",
    "Marrow",
    "Quennell",
    "Dąbrowa",
    "Lindqvist",
    "Ferreira",
    "Halloran",
    "Åkerlund",
    "Moreau",
    "Thorsen",
    "Ibáñez",
    "Kessler",
    "Abernathy",
    "Fairweather",
    "Grünwald",
    "Hrabal",
    "Jansson",
    "Kirsch",
    "Lefèvre",
    "Molnár",
    "Nyström",
    "Oberlin",
    "Pellegrini",
    "Rasmussen",
    "Szabó",
    "Underhill",
    "Valdés",
    "Whitcombe",
    "Zieliński",
    "Ashdown",
    "Corvin",
    "Dunmore",
    "Eszterházy",
    "Falkenrath",
    "Gąsior",
    "Hellström",
    "Ivanović",
    "Jørgensen",
    "Kallio",
]
COUNTRIES = [  # name, demonym, currency, language
    ("Veloria", "Velorian", "velor", "Velorian"),
    ("Kestrany", "Kestranian", "kestran mark", "Kestranian"),
    ("Ålmark", "Ålmarkish", "ålmark krone", "Ålmarkish"),
    ("Norvessa", "Norvessan", "norvessan florin", "Norvessan"),
    ("Querenza", "Querenzan", "querenzan real", "Querenzan"),
]
SPECIAL_TOWNS = [
    "São Miguel",
    "Łódźberg",
    "Ærøby",
    "St. Aldric",
    "St. Morwen",
    "Köningsfeld",
    "Vila Nova da Serra",
]
TOWN_HEADS = [
    "Ash",
    "Bel",
    "Cor",
    "Dun",
    "El",
    "Fen",
    "Gal",
    "Hol",
    "Kar",
    "Lin",
    "Mar",
    "Nor",
    "Os",
    "Pel",
    "Quen",
    "Rav",
    "Sel",
    "Tor",
    "Ul",
    "Ves",
    "Wen",
    "Yr",
    "Zel",
    "Brö",
    "Kø",
    "Ståh",
    "Gries",
    "Mél",
]
TOWN_TAILS = [
    "ford",
    "haven",
    "wick",
    "mere",
    "by",
    "stad",
    "berg",
    "holm",
    "minster",
    "field",
    "port",
    "dale",
    "ova",
    "ice",
]
RIVERS = [
    "Aelna",
    "Vistrel",
    "Omber",
    "Sélune",
    "Drava Minor",
    "Kølle",
    "Marrin",
    "Tessaly",
    "Ûrsa",
    "Breckwater",
    "Lönn",
    "Caldra",
]
MOUNTAINS = [
    "Mt. Orvell",
    "Mt. Kestrel",
    "Mt. Halvard",
    "Mt. Sorrow",
    "Mt. Æsir",
    "Mt. Brannoch",
    "Mt. Vigil",
]
KNOWN_FOR = [
    "glassmaking",
    "lacework",
    "shipbuilding",
    "salt mining",
    "clockmaking",
    "its vineyards",
    "its cathedral",
    "wool weaving",
    "paper mills",
    "its harbour",
    "cheese",
    "its hot springs",
]
OCCUPATIONS = [  # occupation, field of study, kind of notable work
    ("chemist", "chemistry", "treatise"),
    ("painter", "fine art", "painting"),
    ("architect", "architecture", "building"),
    ("composer", "music", "symphony"),
    ("engineer", "engineering", "design"),
    ("novelist", "literature", "novel"),
    ("botanist", "botany", "treatise"),
    ("cartographer", "geography", "atlas"),
    ("physician", "medicine", "treatise"),
    ("astronomer", "astronomy", "catalogue"),
    ("politician", "law", "pamphlet"),
    ("economist", "economics", "treatise"),
]
WORK_ADJ = [
    "Glass",
    "Silent",
    "Northern",
    "Amber",
    "Drowned",
    "Winter",
    "Hollow",
    "Seventh",
    "Iron",
    "Patient",
    "Lantern",
    "Salt",
    "Crimson",
    "Quiet",
    "Distant",
    "Borrowed",
    "Golden",
    "Restless",
    "Hidden",
    "Last",
]
WORK_NOUN = [
    "Orchard",
    "Harbour",
    "Meridian",
    "Garden",
    "Cathedral",
    "Chorus",
    "Almanac",
    "Compass",
    "River",
    "Frontier",
    "Archive",
    "Lighthouse",
    "Atlas",
    "Bridge",
    "Vineyard",
    "Orchestra",
    "Tide",
    "Staircase",
    "Observatory",
    "Mill",
]
AWARDS = [
    "Order of the Silver Heron",
    "Kestrel Prize",
    "Golden Compass Medal",
    "Ørsted Medal",
    "Lantern Prize",
    "Royal Star of Ålmark",
]
ORG_KINDS = [  # suffix, kind, what it does (completes "which ...")
    ("Glassworks", "glassworks", "glassware"),
    ("Shipping Company", "shipping company", "cargo vessels"),
    ("Clockworks", "clockmaker", "tower clocks"),
    ("Brewery", "brewery", "dark beer"),
    ("Railway Company", "railway company", "locomotives"),
    ("Paper Mill", "paper mill", "writing paper"),
    ("Gazette", "newspaper", "a daily newspaper"),
    ("Philharmonic Orchestra", "orchestra", "concerts"),
    ("Botanical Society", "learned society", "seed catalogues"),
    ("Savings Bank", "bank", "savings accounts"),
    ("Porcelain Manufactory", "porcelain maker", "tableware"),
    ("Publishing House", "publisher", "atlases"),
]
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
EDITORS = [
    "Asparagusus",
    "Quillwright",
    "Marginalia42",
    "TessalyBot",
    "Ødegaard-ed",
    "Citoyenne",
    "Lanternfish",
    "Heronwatch",
]


def ascii_fold(text: str) -> str:
    """'Łódźberg' -> 'Lodzberg': what readers type, hence the titles of the redirect pages."""
    text = text.translate(
        str.maketrans({"Ł": "L", "ł": "l", "Ø": "O", "ø": "o", "Æ": "Ae", "æ": "ae", "ß": "ss", "đ": "d"})
    )
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


def slugify(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", ascii_fold(text).lower()).strip("-")


# --------------------------------------------------------------------------------------------
# The world: entities with facts. `facts` maps a relation to the exact text that states it.


@dataclass
class Entity:
    key: str  # "person:12"
    kind: str  # person | town | country | university | organisation | event
    title: str  # the article title
    facts: dict[str, str] = field(default_factory=dict)
    attrs: dict = field(default_factory=dict)
    dev: bool = False


@dataclass
class World:
    seed: int
    countries: list[Entity]
    towns: list[Entity]
    universities: list[Entity]
    organisations: list[Entity]
    people: list[Entity]
    events: list[Entity]

    def all(self) -> list[Entity]:
        return (
            self.countries + self.towns + self.universities + self.organisations + self.people + self.events
        )


def _unique(rng: random.Random, make, taken: set[str]) -> str:
    for _ in range(1000):
        name = make()
        if name not in taken:
            taken.add(name)
            return name
    raise RuntimeError("name space exhausted")  # a bug in the name lists, not a user error


def _unique_pair(rng: random.Random, towns: list[Entity], make, taken: set[str]) -> tuple[Entity, str]:
    """A town and a name made from it (and from chance) that no other entity has."""
    for _ in range(1000):
        town = rng.choice(towns)
        name = make(town)
        if name not in taken:
            taken.add(name)
            return town, name
    raise RuntimeError("name space exhausted")


def _date(rng: random.Random, year: int) -> tuple[str, int, int]:
    month = rng.randint(1, 12)
    day = rng.randint(1, 28)
    return f"{day} {MONTHS[month - 1]}", month, day


def build_world(seed: int) -> World:
    rng = random.Random(seed)
    titles: set[str] = set()

    countries = []
    for i, (name, demonym, currency, language) in enumerate(COUNTRIES):
        titles.add(name)
        c = Entity(f"country:{i}", "country", name)
        c.attrs.update(name=name, demonym=demonym)
        c.facts.update(currency=currency, language=language, independence_year=str(rng.randint(1640, 1890)))
        countries.append(c)

    towns = []
    specials = list(SPECIAL_TOWNS)
    rng.shuffle(specials)
    for i in range(55):
        name = (
            specials.pop()
            if specials
            else _unique(rng, lambda: rng.choice(TOWN_HEADS) + rng.choice(TOWN_TAILS), titles)
        )
        titles.add(name)
        country = countries[i % len(countries)]
        t = Entity(f"town:{i}", "town", name)
        t.attrs.update(name=name, country=country)
        t.facts.update(
            country=country.title,
            founded_year=str(rng.randint(1080, 1790)),
            river=rng.choice(RIVERS),
            population=f"{rng.randint(3, 900) * 100 + rng.randint(0, 9) * 10:,}",
            known_for=rng.choice(KNOWN_FOR),
        )
        if rng.random() < 0.5:
            t.facts["mountain"] = rng.choice(MOUNTAINS)
        towns.append(t)
    for c in countries:  # each country's capital is one of its towns
        capital = rng.choice([t for t in towns if t.attrs["country"] is c])
        c.facts["capital"] = capital.title
        c.attrs["capital"] = capital

    people = []
    for i in range(150):
        female = rng.random() < 0.5
        given = rng.choice(FEMALE_NAMES if female else MALE_NAMES)
        suffix = " Jr." if not female and rng.random() < 0.06 else ""
        name = _unique(rng, lambda g=given, s=suffix: f"{g} {rng.choice(SURNAMES)}{s}", titles)
        birth_year = rng.randint(1820, 1965)
        occupation, subject, work_kind = rng.choice(OCCUPATIONS)
        p = Entity(f"person:{i}", "person", name)
        town = rng.choice(towns)
        day_month, month, day = _date(rng, birth_year)
        p.attrs.update(
            name=name,
            surname=name.split(" ")[1],
            female=female,
            birth=birth_year,
            birth_day=day_month,
            birth_md=(month, day),
            birthplace=town,
            work_kind=work_kind,
            he="she" if female else "he",
            his="her" if female else "his",
        )
        p.facts.update(
            birth_year=str(birth_year), birthplace=town.title, occupation=occupation, field=subject
        )
        lifespan = rng.randint(48, 98)
        if birth_year + lifespan <= 2024:
            death_day, dm, dd = _date(rng, birth_year + lifespan)
            p.attrs.update(death=birth_year + lifespan, death_day=death_day, death_md=(dm, dd))
            p.facts["death_year"] = str(birth_year + lifespan)
            place = rng.choice(towns)
            p.facts["death_place"] = place.title
            p.attrs["death_place"] = place
        p.attrs["last_year"] = p.attrs.get("death", 2025)
        work_year = birth_year + rng.randint(26, 45)
        if work_year < p.attrs["last_year"]:
            p.facts["work"] = _unique(
                rng, lambda: f"The {rng.choice(WORK_ADJ)} {rng.choice(WORK_NOUN)}", titles
            )
            p.facts["work_year"] = str(work_year)
        award_year = birth_year + rng.randint(40, 60)
        if rng.random() < 0.45 and award_year < p.attrs["last_year"]:
            p.facts["award"] = rng.choice(AWARDS)
            p.facts["award_year"] = str(award_year)
        people.append(p)

    # Universities are founded by early-born people, then everybody born later may study there.
    universities = []
    early = sorted(people, key=lambda p: (p.attrs["birth"], p.key))[:25]
    for i, founder in enumerate(rng.sample(early, 10)):
        styles = [
            "University of {town}",
            "{town} Institute of Technology",
            "{surname} College",
            "Royal Academy of {town}",
        ]
        town, name = _unique_pair(
            rng,
            towns,
            lambda t, f=founder, styles=styles: rng.choice(styles).format(
                town=t.title, surname=f.attrs["surname"]
            ),
            titles,
        )
        u = Entity(f"university:{i}", "university", name)
        u.attrs.update(name=name, town=town, founder=founder)
        u.facts.update(
            town=town.title,
            founder=founder.title,
            founded_year=str(founder.attrs["birth"] + rng.randint(30, 45)),
            students=f"{rng.randint(8, 240) * 100:,}",
            motto=rng.choice(
                [
                    "Lux in tenebris",
                    "Per aspera ad astra",
                    "Scientia et labor",
                    "Fluctuat nec mergitur",
                    "Veritas vincit",
                ]
            ),
        )
        founder.attrs["founded_university"] = u
        universities.append(u)
    for p in people:
        options = [u for u in universities if int(u.facts["founded_year"]) <= p.attrs["birth"] + 18]
        if options:
            u = rng.choice(options)
            p.facts["university"] = u.title
            p.attrs["university"] = u

    # Marriages between people born within ten years of each other.
    singles = sorted(people, key=lambda p: (p.attrs["birth"], p.key))
    rng.shuffle(singles)
    for p in singles:
        if "spouse" in p.facts or rng.random() < 0.3:
            continue
        for q in singles:
            if q is p or "spouse" in q.facts or abs(q.attrs["birth"] - p.attrs["birth"]) > 10:
                continue
            year = max(p.attrs["birth"], q.attrs["birth"]) + rng.randint(20, 34)
            if year >= min(p.attrs["last_year"], q.attrs["last_year"]):
                continue
            for a, b in ((p, q), (q, p)):
                a.facts["spouse"] = b.title
                a.facts["marriage_year"] = str(year)
                a.attrs["spouse"] = b
            break

    organisations = []
    founders = [p for p in people if "founded_university" not in p.attrs]
    rng.shuffle(founders)
    for i, founder in enumerate(founders[:40]):
        suffix, kind, product = rng.choice(ORG_KINDS)
        hq = founder.attrs["birthplace"] if rng.random() < 0.6 else rng.choice(towns)
        base = founder.attrs["surname"] if rng.random() < 0.5 else hq.title
        name = _unique(
            rng,
            lambda b=base, s=suffix: (
                f"{b} {s}"
                if b not in titles and f"{b} {s}" not in titles
                else f"{rng.choice(WORK_ADJ)} {b} {s}"
            ),
            titles,
        )
        year = founder.attrs["birth"] + rng.randint(24, 45)
        o = Entity(f"organisation:{i}", "organisation", name)
        o.attrs.update(name=name, kind=kind, founder=founder, hq=hq)
        o.facts.update(
            founder=founder.title,
            founded_year=str(year),
            headquarters=hq.title,
            product=product,
            employees=f"{rng.randint(4, 600) * 10:,}",
            employees_year=str(min(year + rng.randint(10, 60), 2024)),
        )
        founder.facts["founded"] = name
        founder.attrs["founded"] = o
        organisations.append(o)

    events = []
    leaders = list(people)
    rng.shuffle(leaders)
    styles = ["festival", "flood", "treaty", "expedition", "exhibition", "strike", "fire"]
    for i in range(35):
        leader = leaders[i]
        style = styles[i % len(styles)]
        year = min(leader.attrs["birth"] + rng.randint(25, 45), leader.attrs["last_year"] - 1)
        count = f"{rng.randint(2, 900) * 10:,}"
        if style == "festival":
            make, role, what = (
                (
                    lambda t: (
                        f"{t.title} {rng.choice(['Lantern', 'Harvest', 'River', 'Glass', 'Winter'])} Festival"
                    )
                ),
                "founded",
                "visitors",
            )
        elif style == "flood":
            make, role, what = (
                (lambda t: f"Great Flood of {t.title}"),
                "led the relief effort after",
                "people displaced",
            )
        elif style == "treaty":
            make, role, what = (lambda t: f"Treaty of {t.title}"), "negotiated", "delegates"
        elif style == "expedition":
            make, role, what = (
                (lambda t, y=year: f"{rng.choice(MOUNTAINS)[4:]} Expedition of {y}"),
                "led",
                "members",
            )
        elif style == "exhibition":
            make, role, what = (lambda t, y=year: f"{t.title} Exhibition of {y}"), "organised", "visitors"
        elif style == "strike":
            make, role, what = (
                (
                    lambda t: (
                        f"{t.title} {rng.choice(['Dockworkers', 'Glassblowers', 'Weavers', 'Miners'])}' Strike"
                    )
                ),
                "led",
                "strikers",
            )
        else:
            make, role, what = (
                (lambda t, y=year: f"Fire of {t.title} ({y})"),
                "led the rebuilding after",
                "houses destroyed",
            )
        # half of the events happen in the leader's home town (when that gives a new name)
        at_home = make(leader.attrs["birthplace"]) if rng.random() < 0.5 else None
        if at_home and at_home not in titles:
            town, name = leader.attrs["birthplace"], at_home
            titles.add(name)
        else:
            town, name = _unique_pair(rng, towns, make, titles)
        e = Entity(f"event:{i}", "event", name)
        e.attrs.update(name=name, style=style, town=town, leader=leader, role=role, what=what)
        e.facts.update(year=str(year), place=town.title, leader=leader.title, count=count)
        leader.attrs.setdefault("events", []).append(e)
        events.append(e)

    world = World(seed, countries, towns, universities, organisations, people, events)
    for kind_entities in (towns, universities, organisations, people, events):
        for e in rng.sample(kind_entities, round(len(kind_entities) * DEV_FRACTION)):
            e.dev = True
    return world


# --------------------------------------------------------------------------------------------
# Prose. A paragraph is built from pieces that carry both their wikitext and their plain
# rendering, so the plain text (the SQuAD context) and every fact's span in it are exact.


@dataclass
class Piece:
    wiki: str
    plain: str
    fact: tuple[str, str] | None = None  # (entity key, relation)


def T(text: str, fact=None) -> Piece:
    return Piece(text, text, fact)


def L(entity_or_title, label: str | None = None, fact=None) -> Piece:
    title = entity_or_title.title if isinstance(entity_or_title, Entity) else entity_or_title
    shown = label or title
    return Piece(f"[[{title}]]" if shown == title else f"[[{title}|{shown}]]", shown, fact)


def I(text: str, fact=None) -> Piece:  # noqa: E743 - wikitext italic; wikiextractor renders ''x'' as "x"
    return Piece(f"''{text}''", f'"{text}"', fact)


def B(text: str) -> Piece:
    return Piece(f"'''{text}'''", text)


def REF(rng: random.Random, refs: dict[str, str], source: str) -> Piece:
    """A citation: the first use defines a named ref, later uses are self-closing; plain: nothing."""
    if source in refs:
        return Piece(f'<ref name="{refs[source]}" />', "")
    if rng.random() < 0.6:
        refs[source] = f"r{len(refs) + 1}"
        return Piece(f'<ref name="{refs[source]}">{source}</ref>', "")
    return Piece(f"<ref>{source}</ref>", "")


class Paragraph:
    def __init__(self):
        self.pieces: list[Piece] = []

    def say(self, template: str, sep: str = " ", **slots) -> Paragraph:
        """Append one sentence: `{slot}` names a Piece (or a str) in `slots`, the rest is literal.
        `sep` goes between it and what came before ("" continues a sentence begun with `add`)."""
        if self.pieces and sep:
            self.pieces.append(T(sep))
        for i, part in enumerate(re.split(r"\{(\w+)\}", template)):
            if i % 2:
                slot = slots[part]
                self.pieces.append(slot if isinstance(slot, Piece) else T(str(slot)))
            elif part:
                if part.startswith(".") and self.pieces and self.pieces[-1].plain.endswith("."):
                    part = part[1:]  # "... Tomás Vráblik Jr." must not end in ".."
                self.pieces.append(T(part))
        return self

    def add(self, piece: Piece) -> Paragraph:
        self.pieces.append(piece)
        return self

    @property
    def wiki(self) -> str:
        return "".join(p.wiki for p in self.pieces)

    def plain_and_spans(self) -> tuple[str, list[tuple[tuple[str, str], int, str]]]:
        text, spans = "", []
        for p in self.pieces:
            plain = p.plain
            if p.fact:
                spans.append((p.fact, len(text) + (1 if plain.startswith('"') else 0), plain.strip('"')))
            text += plain
        return text, spans


def fact(entity: Entity, relation: str, link: Entity | None = None, italic: bool = False) -> Piece:
    value = entity.facts[relation]
    key = (entity.key, relation)
    if link is not None:
        return L(link, fact=key)
    return I(value, fact=key) if italic else T(value, fact=key)


def an(word: str) -> str:
    return ("an " if ascii_fold(word[0]).lower() in "aeiou" else "a ") + word  # "an Ålmarkish novelist"


FILLER = [
    "Contemporary accounts describe the period as one of slow but steady change.",
    "Much of what is known about these years comes from letters kept in the regional archive.",
    "Historians have debated the details, e.g. the exact order of events, for decades.",
    "Local newspapers of the time reported on the matter at considerable length.",
    "The surviving records, although incomplete, agree on the main points.",
    "Several later biographers, including Dr. Ilse Marrow, revisited the subject in the 1990s.",
    "A collection of related papers was later acquired by a library in the U.S. and catalogued there.",
    "The account given here follows the standard reference works.",
]


def person_paragraphs(
    w: World, p: Entity, rng: random.Random, refs: dict
) -> list[tuple[str | None, Paragraph]]:
    a = p.attrs
    town, country = a["birthplace"], a["birthplace"].attrs["country"]
    sections: list[tuple[str | None, Paragraph]] = []
    lead = Paragraph()
    lead.add(B(p.title)).add(T(f" ({a['birth_day']} ")).add(fact(p, "birth_year"))
    if "death_year" in p.facts:
        # "&nbsp;&ndash; " in wikitext (escaped once more in the XML); extraction renders the characters.
        lead.add(Piece("&nbsp;&ndash; ", "\u00a0\u2013 ")).add(T(f"{a['death_day']} ")).add(
            fact(p, "death_year")
        )
    demonym = country.attrs["demonym"]
    lead.say(
        ") was {a} {demonym} {occ}.",
        sep="",
        a=an(demonym).split(" ")[0],
        demonym=L(country, demonym),
        occ=L(p.facts["occupation"].capitalize(), p.facts["occupation"], fact=(p.key, "occupation")),
    )
    if "founded" in a:
        lead.say(
            "{He} is best known as the founder of the {org}.",
            He=a["he"].capitalize(),
            org=L(a["founded"], fact=(p.key, "founded")),
        )
    elif "work" in p.facts:
        lead.say(
            "{He} is best remembered for the {kind} {work}.",
            He=a["he"].capitalize(),
            kind=a["work_kind"],
            work=fact(p, "work", italic=True),
        )
    lives = f"{{{{cite book |last={rng.choice(SURNAMES)} |title=Lives of {country.title} |year={rng.randint(1950, 2020)} |p={rng.randint(3, 400)}}}}}"
    lead.add(REF(rng, refs, lives))
    sections.append((None, lead))

    early = Paragraph()
    early.say(
        rng.choice(
            [
                "{name} was born in {town}, a town in {country}, in {year}.",
                "Born in {year} in {town}, {country}, {name} grew up in a family of modest means.",
                "{name} was born in {town} in {year}; the family later moved to a larger house near the river.",
            ]
        ),
        name=p.title,
        town=fact(p, "birthplace", link=town),
        country=L(country),
        year=fact(p, "birth_year"),
    )
    early.say(
        "The town was then known above all for {kf}, and the young {surname} spent long hours watching the workshops.",
        kf=town.facts["known_for"],
        surname=a["surname"],
    )
    if "university" in a:
        uni = a["university"]
        early.say(
            rng.choice(
                [
                    "{He} studied {field} at the {uni}, graduating in {grad}.",
                    "In {start}, {he} went to the {uni} to study {field}.",
                    "{He} later read {field} at the {uni}, where {his} teachers thought {him} unusually stubborn.",
                ]
            ),
            He=a["he"].capitalize(),
            he=a["he"],
            his=a["his"],
            him="her" if a["female"] else "him",
            field=fact(p, "field"),
            uni=L(uni, fact=(p.key, "university")),
            grad=a["birth"] + 22,
            start=a["birth"] + 18,
        )
        if rng.random() < 0.5:
            early.add(
                REF(
                    rng,
                    refs,
                    f"{{{{cite web |url=https://archive.example.org/{slugify(uni.title)} |title=Register of students}}}}",
                )
            )
    else:
        early.say(
            "{He} was educated privately and taught {himself} {field} from borrowed books.",
            He=a["he"].capitalize(),
            himself="herself" if a["female"] else "himself",
            field=fact(p, "field"),
        )
    sections.append(("Early life and education", early))

    career = Paragraph()
    career.say(
        rng.choice(
            [
                "{name} worked as {occ} for most of {his} life.",
                "After finishing {his} studies, {name} began a career as {occ}.",
            ]
        ),
        name=p.title,
        his=a["his"],
        occ=T(an(p.facts["occupation"])),
    )
    if "founded" in a:
        org = a["founded"]
        career.say(
            rng.choice(
                [
                    "In {year}, {he} founded the {org} in {hq}.",
                    "{He} established the {org} in {year}, with its offices in {hq}.",
                ]
            ),
            He=a["he"].capitalize(),
            he=a["he"],
            year=fact(org, "founded_year"),
            org=L(org, fact=(p.key, "founded")),
            hq=L(org.attrs["hq"]),
        )
    if "work" in p.facts:
        career.say(
            rng.choice(
                [
                    "{His} best-known {kind}, {work}, appeared in {year}.",
                    "In {year} {he} completed the {kind} {work}, which critics praised as {his} finest.",
                ]
            ),
            His=a["his"].capitalize(),
            his=a["his"],
            he=a["he"],
            kind=a["work_kind"],
            work=fact(p, "work", italic=True),
            year=fact(p, "work_year"),
        )
    if "award" in p.facts:
        career.say(
            "{He} received the {award} in {year}.",
            He=a["he"].capitalize(),
            award=fact(p, "award"),
            year=fact(p, "award_year"),
        )
        career.add(
            REF(
                rng,
                refs,
                f"{{{{cite news |title={p.facts['award']} announced |work=The {country.title} Gazette}}}}",
            )
        )
    if rng.random() < 0.4:
        career.say(
            "In {y} {he} made a lecture tour of the U.S. and of St. Aldric, accompanied by Dr. Otto Kirsch.",
            y=a["birth"] + rng.randint(30, 40),
            he=a["he"],
        )
    career.say(rng.choice(FILLER))
    sections.append(("Career", career))

    personal = Paragraph()
    if "spouse" in a:
        spouse = a["spouse"]
        personal.say(
            rng.choice(
                [
                    "{name} married {spouse} in {year}.",
                    "In {year}, {he} married {spouse}, whom {he} had met in {town}.",
                ]
            ),
            name=p.title,
            he=a["he"],
            spouse=L(spouse, fact=(p.key, "spouse")),
            year=fact(p, "marriage_year"),
            town=L(town),
        )
    if "death_year" in p.facts:
        personal.say(
            rng.choice(
                ["{name} died in {place} in {year}.", "{He} died at {his} home in {place} in {year}."]
            ),
            name=a["surname"] if "spouse" in a else p.title,
            He=a["he"].capitalize(),
            his=a["his"],
            place=fact(p, "death_place", link=a["death_place"]),
            year=fact(p, "death_year"),
        )
    else:
        personal.say("{He} lives in {place}.", He=a["he"].capitalize(), place=L(rng.choice(w.towns)))
    personal.add(REF(rng, refs, lives))
    if personal.pieces:
        sections.append(("Personal life", personal))
    return sections


def org_paragraphs(w, o, rng, refs):
    a = o.attrs
    lead = Paragraph().add(B(o.title))
    lead.say(
        " is {kind} based in {hq}, {country}.",
        sep="",
        kind=T(an(a["kind"])),
        hq=fact(o, "headquarters", link=a["hq"]),
        country=L(a["hq"].attrs["country"]),
    )
    lead.say(
        "It was founded by {founder} in {year}.",
        founder=fact(o, "founder", link=a["founder"]),
        year=fact(o, "founded_year"),
    )
    lead.add(REF(rng, refs, f"{{{{cite web |title=About the {o.title} |publisher={o.title}}}}}"))
    history = Paragraph()
    history.say(
        rng.choice(
            [
                "From the beginning the firm made {product}, and it soon became one of the larger employers in the region.",
                "Its main business has always been {product}, sold first in {hq} and later across {country}.",
            ]
        ),
        product=fact(o, "product"),
        hq=a["hq"].title,
        country=a["hq"].attrs["country"].title,
    )
    history.say("By {year} it employed {n} people.", year=fact(o, "employees_year"), n=fact(o, "employees"))
    history.say(rng.choice(FILLER))
    return [(None, lead), ("History", history)]


def town_paragraphs(w, t, rng, refs):
    a = t.attrs
    lead = Paragraph().add(B(t.title))
    lead.say(
        " is a town in {country} on the river {river}.",
        sep="",
        country=fact(t, "country", link=a["country"]),
        river=fact(t, "river"),
    )
    lead.say("It had a population of {pop} at the 2020 census.", pop=fact(t, "population"))
    lead.add(
        REF(rng, refs, f"{{{{cite web |title=Census 2020 |publisher=Statistics {a['country'].title}}}}}")
    )
    if "mountain" in t.facts:
        lead.say("The town lies at the foot of {m}.", m=fact(t, "mountain"))
    history = Paragraph()
    history.say(
        rng.choice(
            [
                "{name} was founded in {year} as a market settlement.",
                "According to the town charter, {name} was founded in {year}.",
            ]
        ),
        name=t.title,
        year=fact(t, "founded_year"),
    )
    history.say(
        "It is known for {kf}, and local crafts, e.g. weaving and carving, are still taught there.",
        kf=fact(t, "known_for"),
    )
    history.say(rng.choice(FILLER))
    return [(None, lead), ("History", history)]


def country_paragraphs(w, c, rng, refs):
    lead = Paragraph().add(B(c.title))
    lead.say(
        " is a fictional country whose capital is {capital}.",
        sep="",
        capital=fact(c, "capital", link=c.attrs["capital"]),
    )
    lead.say(
        "Its official language is {lang} and its currency is the {cur}.",
        lang=fact(c, "language"),
        cur=fact(c, "currency"),
    )
    history = Paragraph()
    history.say("{name} became independent in {year}.", name=c.title, year=fact(c, "independence_year"))
    history.say(rng.choice(FILLER))
    return [(None, lead), ("History", history)]


def university_paragraphs(w, u, rng, refs):
    a = u.attrs
    lead = Paragraph().add(T("The ")).add(B(u.title))
    lead.say(
        " is a university in {town}, {country}.",
        sep="",
        town=fact(u, "town", link=a["town"]),
        country=L(a["town"].attrs["country"]),
    )
    lead.say(
        "It was founded in {year} by {founder}.",
        year=fact(u, "founded_year"),
        founder=fact(u, "founder", link=a["founder"]),
    )
    lead.say("Its motto is {motto}.", motto=fact(u, "motto", italic=True))
    history = Paragraph()
    history.say("In 2020 the university had {n} students.", n=fact(u, "students"))
    history.say(rng.choice(FILLER))
    return [(None, lead), ("Students", history)]


def event_paragraphs(w, e, rng, refs):
    a = e.attrs
    lead = Paragraph().add(T("The ")).add(B(e.title))
    lead.say(
        " took place in {place} in {year}.",
        sep="",
        place=fact(e, "place", link=a["town"]),
        year=fact(e, "year"),
    )
    lead.say("{leader} {role} it.", leader=fact(e, "leader", link=a["leader"]), role=a["role"])
    aftermath = Paragraph()
    aftermath.say("Contemporary reports counted {n} {what}.", n=fact(e, "count"), what=a["what"])
    aftermath.say(rng.choice(FILLER))
    return [(None, lead), ("Aftermath", aftermath)]


PARAGRAPHS = {
    "person": person_paragraphs,
    "organisation": org_paragraphs,
    "town": town_paragraphs,
    "country": country_paragraphs,
    "university": university_paragraphs,
    "event": event_paragraphs,
}


# --------------------------------------------------------------------------------------------
# Articles: infobox + prose sections + lists/tables + references + categories.


def birth_date_template(p: Entity) -> str:
    m, d = p.attrs["birth_md"]
    return f"{{{{birth date|{p.attrs['birth']}|{m}|{d}}}}}"


def infobox(e: Entity) -> str:
    a, f = e.attrs, e.facts
    if e.kind == "person":
        rows = [
            ("name", e.title),
            ("image", f"{ascii_fold(e.title).replace(' ', '_')}.jpg"),
            ("birth_date", birth_date_template(e)),
            ("birth_place", f"[[{f['birthplace']}]], [[{a['birthplace'].attrs['country'].title}]]"),
        ]
        if "death_year" in f:
            dm, dd = a["death_md"]
            bm, bd = a["birth_md"]
            rows += [
                ("death_date", f"{{{{death date and age|{a['death']}|{dm}|{dd}|{a['birth']}|{bm}|{bd}}}}}"),
                ("death_place", f"[[{f['death_place']}]]"),
            ]
        if "university" in f:
            rows.append(("alma_mater", f"[[{f['university']}]]"))
        rows.append(("occupation", f["occupation"].capitalize()))
        if "spouse" in f:
            rows.append(("spouse", f"{{{{marriage|[[{f['spouse']}]]|{f['marriage_year']}}}}}"))
        if "founded" in f:
            rows.append(("known_for", f"Founding the [[{f['founded']}]]"))
        name = "Infobox person"
    elif e.kind == "town":
        rows = [
            ("name", e.title),
            ("settlement_type", "Town"),
            ("subdivision_type", "Country"),
            ("subdivision_name", f"{{{{flag|{f['country']}}}}}"),
            ("established_date", f["founded_year"]),
            ("population_total", f"{{{{formatnum:{f['population'].replace(',', '')}}}}}"),
            ("population_as_of", "2020"),
        ]
        name = "Infobox settlement"
    elif e.kind == "organisation":
        rows = [
            ("name", e.title),
            ("type", a["kind"].capitalize()),
            ("founded", f"{{{{start date and age|{f['founded_year']}}}}}"),
            ("founder", f"[[{f['founder']}]]"),
            ("hq_location_city", f"[[{f['headquarters']}]]"),
            ("num_employees", f"{f['employees']} ({f['employees_year']})"),
        ]
        name = "Infobox organization"
    elif e.kind == "university":
        rows = [
            ("name", e.title),
            ("motto", f"''{f['motto']}''"),
            ("established", f["founded_year"]),
            ("founder", f"[[{f['founder']}]]"),
            ("city", f"[[{f['town']}]]"),
            ("students", f["students"]),
        ]
        name = "Infobox university"
    elif e.kind == "event":
        rows = [
            ("title", e.title),
            ("date", f["year"]),
            ("location", f"[[{f['place']}]]"),
            ("participants", f["count"]),
        ]
        name = "Infobox event"
    else:
        rows = [
            ("conventional_long_name", e.title),
            ("capital", f"[[{f['capital']}]]"),
            ("official_languages", f["language"]),
            ("currency", f["currency"]),
            ("established_date1", f["independence_year"]),
        ]
        name = "Infobox country"
    width = max(len(k) for k, _ in rows)
    return "{{" + name + "\n" + "".join(f"| {k.ljust(width)} = {v}\n" for k, v in rows) + "}}"


def categories(e: Entity) -> list[str]:
    f, a = e.facts, e.attrs
    if e.kind == "person":
        country = a["birthplace"].attrs["country"]
        cats = [f"{f['birth_year']} births"] + (
            [f"{f['death_year']} deaths"] if "death_year" in f else ["Living people"]
        )
        return cats + [f"{country.attrs['demonym']} {f['occupation']}s", f"People from {f['birthplace']}"]
    if e.kind == "town":
        return [f"Towns in {f['country']}", f"Populated places established in {f['founded_year']}"]
    if e.kind == "organisation":
        return [
            f"Companies based in {f['headquarters']}",
            f"Organizations established in {f['founded_year']}",
        ]
    if e.kind == "university":
        return [
            f"Universities in {a['town'].attrs['country'].title}",
            f"Educational institutions established in {f['founded_year']}",
        ]
    if e.kind == "event":
        return [f"{f['year']} in {a['town'].attrs['country'].title}", f"Events in {f['place']}"]
    return ["Fictional countries"]


def extra_blocks(w: World, e: Entity, rng: random.Random) -> list[str]:
    """Lists and tables: markup extraction drops, so they never hold the only copy of a fact."""
    blocks = []
    if e.kind == "town":
        natives = [p for p in w.people if p.attrs["birthplace"] is e][:6]
        if natives:
            blocks.append(
                "== Notable people ==\n"
                + "".join(
                    f"* [[{p.title}]] ({p.facts['birth_year']}&ndash;{p.facts.get('death_year', '')}), {p.facts['occupation']}\n"
                    for p in natives
                ).rstrip()
            )
    if e.kind == "person" and "work" in e.facts and rng.random() < 0.5:
        rows = [(int(e.facts["work_year"]), e.facts["work"])] + [
            (
                int(e.facts["work_year"]) + k * rng.randint(2, 6),
                f"{rng.choice(WORK_ADJ)} {rng.choice(WORK_NOUN)}",
            )
            for k in (1, 2)
        ]
        table = (
            '{| class="wikitable sortable"\n|+ Selected works\n! Year !! Title !! Notes\n'
            + "".join(
                f"|-\n| {y} || ''{t}'' || {'{{n/a}}' if i else 'Best known'}\n"
                for i, (y, t) in enumerate(rows)
            )
            + "|}"
        )
        blocks.append("== Works ==\n" + table)
    if e.kind == "organisation":
        blocks.append(
            '== Key figures ==\n{| class="wikitable"\n! Year !! Employees\n|-\n| '
            + e.facts["employees_year"]
            + " || "
            + e.facts["employees"]
            + "\n|}"
        )
    if e.kind == "person" and "award" in e.facts:
        blocks.append(
            f"== Honours ==\n* {e.facts['award']} ({e.facts['award_year']})\n* Freedom of [[{e.facts['birthplace']}]]"
        )
    return blocks


@dataclass
class Article:
    entity: Entity
    wikitext: str
    paragraphs: list[tuple[str, list]]  # (plain text, fact spans) of each prose paragraph


def write_article(w: World, e: Entity, rng: random.Random) -> Article:
    refs: dict[str, str] = {}
    sections = PARAGRAPHS[e.kind](w, e, rng, refs)
    sections.append((WIKI_CONTEXT_HEADING[e.kind], context_paragraph(w, e, rng)))
    short = {
        "person": f"{e.facts.get('occupation', '').capitalize()}",
        "town": f"Town in {e.facts.get('country')}",
    }.get(e.kind, e.kind.capitalize())
    parts = [f"{{{{Short description|{short}}}}}\n{{{{Use dmy dates|date=January 2026}}}}\n" + infobox(e)]
    for heading, para in sections:
        parts.append((f"== {heading} ==\n" if heading else "") + para.wiki)
    parts.extend(extra_blocks(w, e, rng))
    parts.append("== References ==\n{{Reflist}}")
    parts.append("\n".join(f"[[Category:{c}]]" for c in categories(e)))
    return Article(e, "\n\n".join(parts), [para.plain_and_spans() for _, para in sections])


# --------------------------------------------------------------------------------------------
# The MediaWiki XML export.

NAMESPACES = [
    (-2, "Media"),
    (-1, "Special"),
    (0, ""),
    (1, "Talk"),
    (2, "User"),
    (3, "User talk"),
    (4, "Wikipedia"),
    (5, "Wikipedia talk"),
    (6, "File"),
    (7, "File talk"),
    (8, "MediaWiki"),
    (9, "MediaWiki talk"),
    (10, "Template"),
    (11, "Template talk"),
    (12, "Help"),
    (13, "Help talk"),
    (14, "Category"),
    (15, "Category talk"),
    (100, "Portal"),
    (101, "Portal talk"),
    (118, "Draft"),
    (119, "Draft talk"),
    (710, "TimedText"),
    (711, "TimedText talk"),
    (828, "Module"),
    (829, "Module talk"),
]


def xml_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def mediawiki_sha1(text: str) -> str:
    """The base-36 SHA-1 MediaWiki writes into dumps (31 digits, zero-padded)."""
    n = int(hashlib.sha1(text.encode("utf-8")).hexdigest(), 16)
    digits = ""
    while n:
        n, r = divmod(n, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[r] + digits
    return digits.rjust(31, "0")


def page_xml(
    rng: random.Random, page_id: int, title: str, ns: int, text: str, redirect: str | None = None
) -> str:
    sha1 = mediawiki_sha1(text)
    stamp = f"{rng.randint(2023, 2025)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}Z"
    rev = 1_200_000_000 + page_id * 97 + rng.randint(0, 96)
    editor = rng.choice(EDITORS)
    return (
        f"  <page>\n    <title>{xml_escape(title)}</title>\n    <ns>{ns}</ns>\n    <id>{page_id}</id>\n"
        + (
            f'    <redirect title="{xml_escape(redirect).replace(chr(34), "&quot;")}" />\n'
            if redirect
            else ""
        )
        + f"    <revision>\n      <id>{rev}</id>\n      <parentid>{rev - rng.randint(1, 5000)}</parentid>\n"
        f"      <timestamp>{stamp}</timestamp>\n      <contributor>\n        <username>{xml_escape(editor)}</username>\n"
        f"        <id>{40_000_000 + EDITORS.index(editor)}</id>\n      </contributor>\n"
        f"      <comment>{rng.choice(['copyedit', 'added citation', 'fix link', '/* History */ expand', 'cleanup'])}</comment>\n"
        f"      <origin>{rev}</origin>\n      <model>wikitext</model>\n      <format>text/x-wiki</format>\n"
        f'      <text bytes="{len(text.encode("utf-8"))}" sha1="{sha1}" xml:space="preserve">{xml_escape(text)}</text>\n'
        f"      <sha1>{sha1}</sha1>\n    </revision>\n  </page>\n"
    )


INFOBOX_PERSON_TEMPLATE = """{{Infobox
| bodyclass  = biography vcard
| above      = {{{name|{{PAGENAME}}}}}
| image      = {{{image|}}}
| label1     = Born
| data1      = {{{birth_date|}}}{{#if:{{{birth_place|}}}|<br />{{{birth_place}}}}}
| label2     = Died
| data2      = {{{death_date|}}}
| label3     = Alma mater
| data3      = {{{alma_mater|}}}
| label4     = Occupation
| data4      = {{{occupation|}}}
| label5     = Spouse
| data5      = {{{spouse|}}}
}}<noinclude>
{{Documentation}}
</noinclude>"""


def support_pages(w: World, rng: random.Random) -> list[tuple[str, int, str]]:
    """Pages outside the article namespace (templates, categories, talk, project, file)."""
    pages = [
        ("Template:Infobox person", 10, INFOBOX_PERSON_TEMPLATE),
        (
            "Template:Birth date",
            10,
            "<includeonly>{{{3}}} {{MONTHNAME|{{{2}}}}} {{{1}}}</includeonly><noinclude>\n{{Documentation}}\n</noinclude>",
        ),
        (
            "Template:Reflist",
            10,
            '<div class="reflist">{{#tag:references|{{{refs|}}}|group={{{group|}}}}}</div><noinclude>{{Documentation}}</noinclude>',
        ),
        (
            "Template:Infobox settlement",
            10,
            "{{Infobox\n| above = {{{name|{{PAGENAME}}}}}\n| label1 = Population\n| data1 = {{{population_total|}}}\n}}<noinclude>{{Documentation}}</noinclude>",
        ),
        (
            "Template:Disambiguation",
            10,
            "This [[Wikipedia:Disambiguation|disambiguation]] page lists articles associated with the same title.<includeonly>[[Category:Disambiguation pages]]</includeonly>",
        ),
        (
            "Wikipedia:About",
            4,
            "'''Samplewiki''' is a small encyclopaedia about an invented world, generated for testing. This page must never appear in a training corpus.",
        ),
        (
            "Wikipedia:Manual of Style",
            4,
            "Write '''plain''' sentences. This project page must never appear in a training corpus.",
        ),
        ("File:Map of Veloria.svg", 6, "== Summary ==\nA map of Veloria.\n== Licensing ==\n{{PD-self}}"),
    ]
    for c in w.countries:
        pages.append(
            (
                f"Category:People from {c.title}",
                14,
                f"People born in [[{c.title}]].\n\n[[Category:{c.title}]]",
            )
        )
        pages.append(
            (f"Category:Towns in {c.title}", 14, f"Towns of [[{c.title}]].\n\n[[Category:{c.title}]]")
        )
    for e in rng.sample(w.people, 8):
        pages.append(
            (
                f"Talk:{e.title}",
                1,
                f"== Birth year ==\nIs the birth year right? This talk page must never appear in a training corpus. ~~~~\n:Yes, see the register. --[[User:{rng.choice(EDITORS)}]] 12:00, 1 May 2024 (UTC)",
            )
        )
    return pages


def disambiguation_pages(w: World) -> list[tuple[str, str]]:
    by_surname: dict[str, list[Entity]] = {}
    for p in w.people:
        by_surname.setdefault(p.attrs["surname"], []).append(p)
    shared = sorted(
        (s for s, ps in by_surname.items() if len(ps) >= 3), key=lambda s: (-len(by_surname[s]), s)
    )[:3]
    return [
        (
            f"{s} (surname)",
            f"'''{s}''' is a surname. Notable people with the surname include:\n"
            + "".join(
                f"* [[{p.title}]] (born {p.facts['birth_year']}), {p.facts['occupation']}\n"
                for p in by_surname[s]
            )
            + "\n{{Disambiguation|surname}}",
        )
        for s in shared
    ]


def redirect_pages(w: World, rng: random.Random) -> list[tuple[str, str]]:
    """~30 redirects: titles without diacritics (what people type) and surname-first forms."""
    taken = {e.title for e in w.all()}
    redirects = []
    for e in w.all():
        folded = ascii_fold(e.title)
        if folded != e.title and folded not in taken:
            redirects.append((folded, e.title, "R from title without diacritics"))
            taken.add(folded)
    rng.shuffle(redirects)
    redirects = sorted(redirects[:24], key=lambda r: r[1])
    for p in rng.sample(w.people, 6):
        given, rest = p.title.split(" ", 1)
        title = f"{rest}, {given}"
        if title not in taken:
            taken.add(title)
            redirects.append((title, p.title, "R from sort name"))
    return [
        (title, target, f"#REDIRECT [[{target}]]\n\n{{{{Redirect category shell|\n{{{{{cat}}}}}\n}}}}")
        for title, target, cat in redirects
    ]


def build_dump(w: World, articles: list[Article], rng: random.Random) -> bytes:
    header = (
        '<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
        'xsi:schemaLocation="http://www.mediawiki.org/xml/export-0.11/ http://www.mediawiki.org/xml/export-0.11.xsd" '
        'version="0.11" xml:lang="en">\n  <siteinfo>\n    <sitename>Samplewiki</sitename>\n    <dbname>samplewiki</dbname>\n'
        "    <base>https://sample.wikipedia.example/wiki/Main_Page</base>\n    <generator>MediaWiki 1.46.0-wmf.9</generator>\n"
        "    <case>first-letter</case>\n    <namespaces>\n"
        + "".join(
            f'      <namespace key="{k}" case="first-letter"' + (f">{n}</namespace>\n" if n else " />\n")
            for k, n in NAMESPACES
        )
        + "    </namespaces>\n  </siteinfo>\n"
    )
    pages: list[tuple[str, int, str, str | None]] = [(a.entity.title, 0, a.wikitext, None) for a in articles]
    pages += [(title, 0, text, None) for title, text in disambiguation_pages(w)]
    pages += [(title, 0, text, target) for title, target, text in redirect_pages(w, rng)]
    pages += [(title, ns, text, None) for title, ns, text in support_pages(w, rng)]
    rng.shuffle(pages)  # real dumps interleave namespaces and redirects in page-id order
    body = "".join(
        page_xml(rng, 10 + 7 * i, title, ns, text, target)
        for i, (title, ns, text, target) in enumerate(pages)
    )
    return (header + body + "</mediawiki>\n").encode("utf-8")


# --------------------------------------------------------------------------------------------
# Books: long-form narrative restating the same facts, with chapters and dialogue.

SEASONS = ["spring", "summer", "autumn", "winter"]
STREETS = [
    "Tanners",
    "Chapel",
    "Ropewalk",
    "Market",
    "Lindenhof",
    "Ferry",
    "Orchard",
    "Glasshouse",
    "Bell",
    "Weavers",
]
NARRATIVE = [
    "The {season} of {year} was remembered in {town} for its storms, and the {river} rose higher than anyone could recall.",
    "Letters came and went between {town} and {town2}, some of them long, most of them short and full of news about the price of bread.",
    "In the evenings the household gathered by the stove and talked about {friend}, who had gone abroad and seldom wrote.",
    "Nobody in {town} could remember a {season} so dry, or a market day so quiet.",
    "There were debts to settle, a roof to mend on the house by the {river}, and a great deal of work to do.",
    "Dr. {surname} called twice a week, always with the same black bag and the same advice about fresh air.",
    "The train from {town2} was late again, and the platform filled with impatient travellers and their trunks.",
    "Some said it was luck, others said it was stubbornness; the truth, as {friend} liked to say, was probably both.",
    "On Sundays the bells of St. Morwen could be heard across the valley, as far as the bridge over the {river}.",
    "A cousin wrote from the U.S. with news of cheap land, expensive bread and a brother-in-law nobody had met.",
    "The market square of {town} smelled of bread, wet wool and smoke from the foundries.",
    "Years later the children told the story differently, e.g. moving the wedding to the {season} or the house to {town2}.",
    "The path up {mountain} was closed for most of the {season}, and the shepherds stayed in the valley.",
    "Prices rose again in {year}, and the shopkeepers of {town} put up handwritten signs apologising for it.",
    "{friend} arrived unannounced one {month} morning with a basket of apples and a great deal of gossip.",
    "The newspapers of {country} printed little else that week.",
    "It rained on the day of the fair, as it always did, and the musicians played under the arches of the town hall.",
    "A fire in the bakery on {street} Street kept the whole street awake until dawn.",
    "Mr. {surname} of the post office claimed to have read every postcard that passed through {town}, and nobody doubted it.",
    "The ferry across the {river} ran twice a day, weather permitting, which it seldom did.",
    "That {season} the swallows came back early, and the old women of {town} said it meant a good harvest.",
    "The winter coats came out of the cedar chest in {month}, smelling faintly of camphor.",
    "In the library of {town} there was a long table by the window, and it was nearly always taken.",
    "Nobody ever found out who had painted the chapel door blue, though {friend} was suspected.",
    "The house on {street} Street had eleven rooms, four chimneys and not one window that closed properly.",
    "Mrs. {surname} kept bees behind the school and sold the honey at the {season} fair.",
    "From the top of the church tower one could see {town2} on a clear day, and {mountain} on a very clear one.",
    "The accounts for {year} were written in a small, careful hand, and every coin was there.",
    "It took three days by coach to reach {town2} in those years, and two if the roads were frozen hard.",
    "{friend} played the violin badly and the piano well, and was asked to play the violin at every wedding.",
    "The tram to the station cost two coins in {year}, and the conductor knew every passenger by name.",
    "A photograph from that {season} shows a long table in a garden, a dog, and eleven people squinting at the sun.",
    "The schoolmaster in {town}, a thin man called Mr. {surname}, believed in arithmetic, cold water and early rising.",
    "{friend} kept a diary in those years, and it is full of weather, debts and small quarrels.",
    "When the ice broke on the {river} in {month}, the whole town came down to the quay to watch.",
    "The telegraph office closed at six, and anything that happened after six had to wait until morning.",
    "There was talk of a railway to {town2}, and for a while there was talk of little else.",
    "The doctor's advice, written on the back of an envelope, was to rest, eat well and stop worrying; none of it was followed.",
    "Every {season} the circus came to {town}, pitched its tent by the {river} and left a month later, poorer than it arrived.",
    "A storm in {month} {year} took the roof off the grain store and half the apples off the trees.",
    "The shop on {street} Street sold everything from lamp oil to wedding veils, and its owner, Mrs. {surname}, sold them all with the same frown.",
    "In {country} in those years a letter took a week, a parcel a fortnight, and a decision rather longer.",
    "{friend} once walked from {town} to {town2} for a bet, and won it, and never let anyone forget it.",
    "The evenings grew long, and the lamps were lit earlier each week.",
    "At the Golden Pike, the inn by the bridge, the talk was of harvests, horses and the price of coal.",
]
WIKI_CONTEXT = {
    "person": [
        "A street in {birthplace} was named after {surname} in {year}.",
        "{His} papers, e.g. notebooks and letters, are held by the {univ}.",
        "In {year} the {org} mounted an exhibition devoted to {his} life and work.",
        "A biography by Dr. {other_surname} appeared in {year}.",
        "Historians have compared {his} career with that of {person}.",
        "A portrait of {surname}, painted around {year2}, hangs in the town hall of {birthplace}.",
    ],
    "town": [
        "{name} lies about {km} kilometres from {town2}.",
        "The climate is mild, with cool summers and wet winters.",
        "The old town, with its narrow streets and timber houses, has been protected as a heritage site since {year}.",
        "A railway line to {town2} opened in {year}.",
        "The main square, St. Anne's Square, hosts a market every Saturday.",
        "The town is twinned with {town2}.",
    ],
    "organisation": [
        "Its first works stood on {street} Street until {year}, when they moved to the edge of {hq}.",
        "Production fell by half during the long depression of the 1930s, and recovered only slowly.",
        "Its archive, e.g. ledgers and letters, is kept at the {univ}.",
        "The firm's records mention a branch office in {town2} from {year}.",
        "A history of the firm by Dr. {other_surname} was published in {year}.",
    ],
    "university": [
        "The main building stands near the river {river} and was extended in {year}.",
        "The library holds about {km},000 volumes.",
        "Its students traditionally row against those of the {univ} each spring.",
        "Former teachers include {person}.",
    ],
    "event": [
        "In the years before, tensions had been rising in {town}.",
        "Accounts differ in details, e.g. the exact day, but agree on the main events.",
        "A memorial was unveiled in {town} in {year}.",
        "The {name} is still commemorated every year with a procession.",
    ],
    "country": [
        "The country is divided into {km} provinces.",
        "Its largest river is the {river}.",
        "Its parliament meets in the old customs house of the capital.",
    ],
}
WIKI_CONTEXT_HEADING = {
    "person": "Legacy",
    "town": "Geography",
    "organisation": "Operations",
    "university": "Campus",
    "event": "Background",
    "country": "Geography",
}


def context_paragraph(w: World, e: Entity, rng: random.Random) -> Paragraph:
    """Encyclopaedic colour without questions attached: links, abbreviations, other entities."""
    a = e.attrs
    home = a.get("birthplace") or a.get("town") or a.get("hq") or a.get("capital") or e
    slots = dict(
        name=e.title,
        surname=a.get("surname", e.title),
        His=a.get("his", "its").capitalize(),
        his=a.get("his", "its"),
        birthplace=L(home),
        year=rng.randint(1900, 2015),
        year2=rng.randint(1850, 1990),
        km=rng.randint(4, 90),
        univ=L(rng.choice(w.universities)),
        org=L(rng.choice(w.organisations)),
        person=L(rng.choice(w.people)),
        other_surname=rng.choice(SURNAMES),
        town=L(home),
        town2=L(rng.choice([t for t in w.towns if t is not home])),
        street=rng.choice(STREETS),
        hq=L(home),
        river=home.facts.get("river", "Aelna"),
    )
    para = Paragraph()
    for template in rng.sample(WIKI_CONTEXT[e.kind], min(3, len(WIKI_CONTEXT[e.kind]))):
        para.say(template, **slots)
    return para


DIALOGUE_CLOSERS = [
    "I have never forgotten the smell of the river.",
    "Nobody believes it now, but it is true.",
    "Write that down before I change my mind.",
    "It seems a very long time ago.",
    "We were younger then, and braver, and a good deal more foolish.",
    "My mother said it would come to nothing.",
    "There was no money, but there was a great deal of hope.",
    "I would do it all again, every bit of it.",
]
BOOK_TITLES = [
    "The {a} of {b}",
    "Letters from {b}",
    "A River Called {r}",
    "Chronicles of {b}",
    "The Long Winter in {b}",
    "Under {m}",
    "The {s} Papers",
    "Houses of {b}",
    "A History of the {s} Family",
    "Notes from {b}",
]
RECOLLECTION = {  # a second, shorter telling of a person in another book
    "birth_year": "{name} was born in {v}",
    "birthplace": "came from {v}",
    "occupation": "worked as {an_v}",
    "field": "had studied {v}",
    "university": "had been a student at the {v}",
    "spouse": "was married to {v}",
    "marriage_year": "had married in {v}",
    "founded": "had founded the {v}",
    "death_year": "died in {v}",
    "death_place": "was buried in {v}",
    "work": 'was remembered for "{v}"',
    "work_year": "had finished it in {v}",
    "award": "had been given the {v}",
    "award_year": "received it in {v}",
}


class Narrator:
    """Slot-filled narrative sentences, never the same template twice within one chapter."""

    def __init__(self, rng: random.Random, w: World):
        self.rng, self.w, self.deck = rng, w, []

    def __call__(self, town: Entity, k: int) -> str:
        if len(self.deck) < k:
            self.deck = list(range(len(NARRATIVE)))
            self.rng.shuffle(self.deck)
        picked, self.deck = self.deck[:k], self.deck[k:]
        return narrative(self.rng, self.w, town, [NARRATIVE[i] for i in picked])


def narrative(rng: random.Random, w: World, town: Entity, templates: list[str]) -> str:
    slots = dict(
        season=rng.choice(SEASONS),
        year=rng.randint(1850, 2010),
        town=town.title,
        town2=rng.choice(w.towns).title,
        river=town.facts["river"],
        friend=rng.choice(w.people).title,
        surname=rng.choice(SURNAMES),
        mountain=town.facts.get("mountain", "Mt. Vigil"),
        month=rng.choice(MONTHS),
        country=town.attrs["country"].title,
        street=rng.choice(STREETS),
    )
    return " ".join(t.format(**slots) for t in templates)


def person_chapter(w: World, p: Entity, rng: random.Random, say_more: Narrator) -> list[str]:
    f, a, n = p.facts, p.attrs, p.title
    town = a["birthplace"]
    friend = rng.choice([x for x in w.people if x is not p]).title
    he, his = a["he"], a["his"]
    lines = [
        f"{n} was born in {f['birthplace']} in {f['birth_year']}. The town lay on the {town.facts['river']} and lived from "
        f"{town.facts['known_for']}. " + say_more(town, 2),
        f'"I was born in {f["birthplace"]} in {f["birth_year"]}," {n} told {friend} many years later. "{rng.choice(DIALOGUE_CLOSERS)}"',
    ]
    if "university" in f:
        lines.append(
            f"In {a['birth'] + 18}, {n} left home for the {f['university']} to study {f['field']}. "
            f"{he.capitalize()} wrote home every week, and {his} letters were mostly about money. "
            + say_more(a["university"].attrs["town"], 1)
        )
    else:
        lines.append(
            f"{n} never went to university and learned {f['field']} from borrowed books, reading late into the night. "
            + say_more(town, 1)
        )
    work = f"{n} became {an(f['occupation'])}"
    if "founded" in a:
        org = a["founded"]
        work += (
            f", and in {org.facts['founded_year']} founded the {f['founded']} in {org.facts['headquarters']}"
        )
    lines.append(work + ". " + say_more(town, 2))
    if "work" in f:
        lines.append(
            f'"{f["work"]}" took years. {n} finished it in {f["work_year"]}, and {friend} was the first to read it. '
            f'"It is the best thing you have done," {friend} said, and {n} did not argue.'
        )
    if "award" in f:
        lines.append(
            f'"They have given me the {f["award"]}," {n} wrote to {friend} in {f["award_year"]}. '
            f'"I shall have to buy a new coat for the ceremony."'
        )
    lines.append(say_more(town, 3))
    lines.append(say_more(town, 4))
    if "spouse" in f:
        lines.append(
            f"{n} married {f['spouse']} in {f['marriage_year']}. "
            + rng.choice(
                [
                    "The wedding was small, and it rained.",
                    "The whole street came to the wedding.",
                    "They had known each other for years before either said a word about it.",
                ]
            )
            + " "
            + say_more(town, 1)
        )
    if "death_year" in f:
        lines.append(
            f"{n} died in {f['death_place']} in {f['death_year']}. "
            + rng.choice(
                [
                    "The funeral was quiet, as had been asked.",
                    "Half the town followed the coffin.",
                    f"{friend} spoke at the graveside and could not finish.",
                ]
            )
        )
    return lines


def recollection(w: World, p: Entity, rng: random.Random, say_more: Narrator) -> list[str]:
    facts = [RECOLLECTION[r].format(name=p.title, v=v, an_v=an(v)) for r, v in p.facts.items()]
    friend = rng.choice([x for x in w.people if x is not p]).title
    return [
        f"{friend} first met {p.title} in {rng.choice(w.towns).title}, and in later life liked to tell the story. "
        + say_more(p.attrs["birthplace"], 1),
        f"{p.title} {', '.join(facts[1:-1])} and {facts[-1]}; {facts[0]}.",
    ]


def other_chapter(w: World, e: Entity, rng: random.Random, say_more: Narrator) -> list[str]:
    f, a, n = e.facts, e.attrs, e.title
    if e.kind == "organisation":
        founder = a["founder"].title
        return [
            f"In {f['founded_year']}, {founder} founded the {n} in {f['headquarters']}. "
            f'"We started with three workers and a borrowed cart," {founder} liked to say. '
            + say_more(a["hq"], 1),
            f"The {n} made {f['product']}, and by {f['employees_year']} it employed {f['employees']} people. "
            + say_more(a["hq"], 2),
        ]
    if e.kind == "town":
        lines = [
            f"{n}, in {f['country']}, was founded in {f['founded_year']} on the banks of the {f['river']}. "
            f"It was known for {f['known_for']}. " + say_more(e, 2),
            f"By 2020 {n} had {f['population']} inhabitants, and the old families complained that they no longer knew anyone.",
        ]
        if "mountain" in f:
            lines.append(f"Above {n} rose {f['mountain']}, white for half the year. " + say_more(e, 1))
        return lines
    if e.kind == "university":
        return [
            f'The {n} was founded in {f["founded_year"]} by {f["founder"]} in {f["town"]}. Its motto, "{f["motto"]}", '
            "was carved over the gate. " + say_more(a["town"], 1),
            f"In 2020 the {n} had {f['students']} students, and the taverns near it did very well.",
        ]
    if e.kind == "event":
        return [
            f"The {n} took place in {f['place']} in {f['year']}, and {f['leader']} {a['role']} it. "
            + say_more(a["town"], 1),
            f'"I counted them myself," {f["leader"]} said of the {n}. "There were {f["count"]} {a["what"]}, not one fewer."',
        ]
    capital = a["capital"]
    return [
        f"{n} became independent in {f['independence_year']}. Its capital was {f['capital']}, its language {f['language']}, "
        f"and in {n} everything was paid for in the {f['currency']}. " + say_more(capital, 2)
    ]


def build_books(w: World, rng: random.Random) -> list[tuple[str, list[str]]]:
    """30 books; every entity is the subject of a chapter, and 60 people are recalled in a second book."""
    people = sorted(
        w.people, key=lambda p: (p.attrs["birthplace"].attrs["country"].key, p.attrs["birth"], p.key)
    )
    n_books = 30
    chapters: list[list[tuple[Entity, bool]]] = [[] for _ in range(n_books)]
    for i, p in enumerate(people):
        chapters[i * n_books // len(people)].append((p, False))
    home = {p.key: i for i, ch in enumerate(chapters) for p, _ in ch}
    for e in w.towns + w.universities + w.organisations + w.events + w.countries:
        anchor = e.attrs.get("founder") or e.attrs.get("leader")
        chapters[home[anchor.key] if anchor else rng.randrange(n_books)].append((e, False))
    for p in rng.sample(people, 60):
        chapters[(home[p.key] + rng.randint(1, n_books - 1)) % n_books].append((p, True))

    books, titles = [], set()
    for subjects in chapters:
        main = subjects[0][0]
        town = main.attrs["birthplace"]
        title = _unique(
            rng,
            lambda t=town, m=main: rng.choice(BOOK_TITLES).format(
                a=rng.choice(WORK_NOUN) + "s",
                b=t.title,
                r=t.facts["river"],
                m=t.facts.get("mountain", "Mt. Orvell"),
                s=m.attrs["surname"],
            ),
            titles,
        )
        lines = [title, f"by {rng.choice(FEMALE_NAMES + MALE_NAMES)} {rng.choice(SURNAMES)}"]
        rng.shuffle(subjects[1:])
        for c, (e, again) in enumerate(subjects, 1):
            lines.append(f"Chapter {c}")
            say_more = Narrator(rng, w)
            if e.kind == "person":
                lines.extend(
                    recollection(w, e, rng, say_more) if again else person_chapter(w, e, rng, say_more)
                )
            else:
                lines.extend(other_chapter(w, e, rng, say_more))
            home_town = (
                e.attrs.get("birthplace")
                or e.attrs.get("town")
                or e.attrs.get("hq")
                or e.attrs.get("capital")
                or e
            )
            lines.extend(say_more(home_town, 3) for _ in range(rng.randint(1, 3)))
        lines.append("The End")
        books.append((slugify(title), lines))
    return books


# --------------------------------------------------------------------------------------------
# SQuAD.

QUESTIONS = {
    "birth_year": [
        "In which year was {name} born?",
        "When was {name} born?",
        "What year was {name} born in?",
    ],
    "birthplace": [
        "Where was {name} born?",
        "In which town was {name} born?",
        "What is the birthplace of {name}?",
    ],
    "occupation": [
        "What was {name}'s profession?",
        "What did {name} work as?",
        "What was the occupation of {name}?",
    ],
    "field": ["What did {name} study?", "Which subject did {name} study?", "What field did {name} study?"],
    "university": [
        "Where did {name} study?",
        "Which university did {name} attend?",
        "At which institution did {name} study?",
    ],
    "spouse": ["Whom did {name} marry?", "Who was {name}'s spouse?", "Who did {name} marry?"],
    "marriage_year": [
        "When did {name} marry {spouse}?",
        "In which year did {name} get married?",
        "What year did {name} marry?",
    ],
    "founded": [
        "Which organisation did {name} found?",
        "What did {name} found?",
        "What is {name} best known for founding?",
    ],
    "death_year": ["In which year did {name} die?", "When did {name} die?", "What year did {name} die in?"],
    "death_place": [
        "Where did {name} die?",
        "In which town did {name} die?",
        "What was the place of death of {name}?",
    ],
    "work": [
        "What is {name}'s best-known work?",
        "What was the title of {name}'s most famous {kind}?",
        "Which {kind} is {name} remembered for?",
    ],
    "work_year": [
        "When did {name}'s best-known {kind} appear?",
        "In which year did {name} complete {work}?",
        "What year was {work} completed?",
    ],
    "award": [
        "Which award did {name} receive?",
        "What honour was {name} given in {award_year}?",
        "What prize did {name} win?",
    ],
    "award_year": [
        "When did {name} receive the {award}?",
        "In which year was {name} given the {award}?",
        "What year did {name} win the {award}?",
    ],
    "founder": ["Who founded the {name}?", "Who established the {name}?", "By whom was the {name} founded?"],
    "founded_year": [
        "When was the {name} founded?",
        "In which year was the {name} established?",
        "What year was the {name} founded?",
    ],
    "headquarters": [
        "Where is the {name} based?",
        "In which town is the {name} headquartered?",
        "Where are the offices of the {name}?",
    ],
    "product": [
        "What does the {name} make?",
        "What is the main business of the {name}?",
        "What has the {name} always produced?",
    ],
    "employees": [
        "How many people did the {name} employ?",
        "How many employees did the {name} have in {employees_year}?",
        "What was the workforce of the {name}?",
    ],
    "employees_year": [
        "In which year did the {name} employ {employees} people?",
        "When did the {name} have {employees} employees?",
    ],
    "country": ["In which country is {name}?", "Which country is {name} in?", "Where is {name} located?"],
    "river": [
        "On which river does {name} lie?",
        "Which river flows through {name}?",
        "What river is {name} on?",
    ],
    "population": [
        "What was the population of {name} in 2020?",
        "How many people lived in {name} at the 2020 census?",
        "How large was the population of {name}?",
    ],
    "known_for": ["What is {name} known for?", "For what is {name} famous?", "What is {name} famous for?"],
    "mountain": [
        "Which mountain overlooks {name}?",
        "At the foot of which mountain does {name} lie?",
        "What mountain is {name} near?",
    ],
    "town": [
        "Where is the {name} located?",
        "In which town is the {name}?",
        "In what town can the {name} be found?",
    ],
    "students": [
        "How many students did the {name} have in 2020?",
        "How many people studied at the {name} in 2020?",
    ],
    "motto": ["What is the motto of the {name}?", "What motto does the {name} have?"],
    "year": [
        "When did the {name} take place?",
        "In which year did the {name} happen?",
        "What year was the {name}?",
    ],
    "place": [
        "Where did the {name} take place?",
        "In which town did the {name} happen?",
        "Where was the {name}?",
    ],
    "leader": ["Who {role} the {name}?", "Which person {role} the {name}?"],
    "count": [
        "How many {what} did reports count during the {name}?",
        "How many {what} were there at the {name}?",
    ],
    "capital": ["What is the capital of {name}?", "Which town is the capital of {name}?"],
    "language": ["What language is spoken in {name}?", "What is the official language of {name}?"],
    "currency": ["What is the currency of {name}?", "What money is used in {name}?"],
    "independence_year": [
        "When did {name} become independent?",
        "In which year did {name} gain independence?",
    ],
}
ANSWER_CLASS = {
    "year": {
        "birth_year",
        "death_year",
        "marriage_year",
        "work_year",
        "award_year",
        "founded_year",
        "employees_year",
        "year",
        "independence_year",
    },
    "place": {"birthplace", "death_place", "headquarters", "town", "place", "capital", "country"},
    "person": {"spouse", "founder", "leader"},
    "number": {"population", "employees", "students", "count"},
}
CLASS_OF = {r: c for c, rs in ANSWER_CLASS.items() for r in rs}


def question_fields(e: Entity) -> dict:
    f = dict(e.facts)
    f.update(
        name=e.title,
        kind=e.attrs.get("work_kind", "work"),
        role=e.attrs.get("role", ""),
        what=e.attrs.get("what", ""),
    )
    return f


def ask(e: Entity, relation: str, rng: random.Random) -> str | None:
    fields = question_fields(e)
    options = [t for t in QUESTIONS[relation] if all(k in fields for k in re.findall(r"\{(\w+)\}", t))]
    if not options:
        return None
    template = rng.choice(options)
    # "the Lantern Prize", "the Treaty of Ærøby", but never "the St. Aldric" or "the Zoë Ångström"
    return template.replace("the {name}", "{name}") if e.kind in ("town", "country", "person") else template


def qa_id(*parts) -> str:
    return hashlib.sha1("|".join(map(str, parts)).encode("utf-8")).hexdigest()[:24]


def gold_answers(context: str, start: int, text: str, rng: random.Random) -> list[dict]:
    """Three annotators' answers, as the official dev sets have: the span, and a wider variant."""
    answers = [{"text": text, "answer_start": start}]
    wider = None
    date = re.search(r"(\d{1,2} [A-Z][a-z]+ )$", context[:start])
    for prefix in ("in ", "on ", "at ", "the ", "by "):
        if context[:start].endswith(prefix):
            wider = {"text": prefix + text, "answer_start": start - len(prefix)}
    if date:
        wider = {"text": date.group(1) + text, "answer_start": start - len(date.group(1))}
    answers.append(wider or dict(answers[0]))
    answers.append(dict(answers[0]))
    rng.shuffle(answers)
    return answers


def build_squad(w: World, articles: list[Article], rng: random.Random) -> tuple[dict, list[dict]]:
    """Both versions and both splits; `facts` lists (split, id, subject title, answer) for tests."""
    by_key = {e.key: e for e in w.all()}
    sets = {(v, s): [] for v in SQUAD_FILES for s in ("train", "dev")}
    qa_facts = []
    for article in articles:
        e = article.entity
        if e.kind == "country":
            continue  # too few to hold out; they stay pretraining-only
        split = "dev" if e.dev else "train"
        paras = {"v1.1": [], "v2.0": []}
        for p_index, (context, spans) in enumerate(article.paragraphs):
            qas_v1, qas_v2, asked = [], [], set()
            for (key, relation), start, text in spans:
                if key != e.key or (key, relation) in asked:
                    continue  # questions ask about the article's subject, once per fact
                asked.add((key, relation))
                assert context[start : start + len(text)] == text, (e.title, relation)
                question = ask(e, relation, rng).format(**question_fields(e))
                qid = qa_id(w.seed, e.title, p_index, question)
                answers = (
                    gold_answers(context, start, text, rng)
                    if split == "dev"
                    else [{"text": text, "answer_start": start}]
                )
                qas_v1.append({"answers": answers, "question": question, "id": qid})
                if rng.random() < V2_ANSWERABLE_SHARE:
                    qas_v2.append(
                        {"question": question, "id": qid, "answers": answers, "is_impossible": False}
                    )
                qa_facts.append(
                    {"split": split, "id": qid, "subject": e.title, "answer": text, "relation": relation}
                )
            for _ in range(sum(rng.random() < 0.55 for _ in qas_v2)):
                impossible = unanswerable(w, e, context, spans, asked, by_key, rng)
                if impossible:
                    question, start, text = impossible
                    qid = qa_id(w.seed, e.title, p_index, question, "impossible")
                    if any(q["id"] == qid for q in qas_v2):
                        continue
                    qas_v2.append(
                        {
                            "plausible_answers": [{"text": text, "answer_start": start}],
                            "question": question,
                            "id": qid,
                            "answers": [],
                            "is_impossible": True,
                        }
                    )
            if qas_v1:
                paras["v1.1"].append({"context": context, "qas": qas_v1})
            if qas_v2:
                paras["v2.0"].append({"context": context, "qas": qas_v2})
        for version, ps in paras.items():
            if ps:
                sets[(version, split)].append({"title": e.title.replace(" ", "_"), "paragraphs": ps})
    return sets, qa_facts


def unanswerable(w, e, context, spans, asked, by_key, rng):
    """A question the paragraph cannot answer, with a plausible (wrong) span in it, as in SQuAD 2.0:
    either the same relation about a similar entity the paragraph never mentions, or another
    relation of the same answer type (asking the death year of a paragraph that gives the birth)."""
    own = [
        (r, start, text)
        for (key, r), start, text in spans
        if key == e.key and (key, r) in asked and r in CLASS_OF
    ]
    if not own:
        return None
    relation, start, text = rng.choice(own)
    if rng.random() < 0.5:
        peers = [
            x
            for x in getattr(
                w,
                {
                    "person": "people",
                    "town": "towns",
                    "organisation": "organisations",
                    "university": "universities",
                    "event": "events",
                }[e.kind],
            )
            if x is not e and relation in x.facts and x.title not in context
        ]
        if peers:
            other = rng.choice(peers)
            template = ask(other, relation, rng)
            if template:
                return template.format(**question_fields(other)), start, text
    stated = {r for (key, r), _, _ in spans if key == e.key}
    alternatives = sorted(
        r
        for r in ANSWER_CLASS[CLASS_OF[relation]]
        if r not in stated and r in QUESTIONS and r in _RELATIONS_OF[e.kind]
    )
    rng.shuffle(alternatives)
    for alt in alternatives:
        template = ask(e, alt, rng)
        if template:
            return template.format(**question_fields(e)), start, text
    return None


_RELATIONS_OF = {
    "person": {
        "birth_year",
        "death_year",
        "marriage_year",
        "work_year",
        "award_year",
        "birthplace",
        "death_place",
        "spouse",
    },
    "town": {"founded_year", "population", "country"},
    "organisation": {"founded_year", "employees_year", "headquarters", "founder", "employees"},
    "university": {"founded_year", "town", "founder", "students"},
    "event": {"year", "place", "leader", "count"},
}


# --------------------------------------------------------------------------------------------
# Writing.


def generate(seed: int) -> tuple[dict[str, bytes], dict]:
    """Everything, in memory: {relative path: bytes} and a summary with counts and the QA facts."""
    world = build_world(seed)
    rng_wiki, rng_books, rng_squad = (random.Random(f"{seed}:{part}") for part in ("wiki", "books", "squad"))
    articles = [write_article(world, e, rng_wiki) for e in world.all()]
    files: dict[str, bytes] = {}
    xml = build_dump(world, articles, rng_wiki)
    files[f"wikipedia/{DUMP_NAME}"] = bz2.compress(xml, compresslevel=9)

    books = sorted(build_books(world, rng_books))  # the Parquet rows follow the .txt files in name order
    all_lines = []
    for slug, lines in books:
        files[f"books/txt/{slug}.txt"] = ("\n".join(lines) + "\n").encode("utf-8")
        all_lines.extend(lines)
    buffer = io.BytesIO()
    pq.write_table(
        pa.table({"text": pa.array(all_lines, pa.string())}),
        buffer,
        compression="zstd",
        compression_level=9,
        row_group_size=1 << 20,
    )
    files[f"books/parquet/{BOOKS_PARQUET}"] = buffer.getvalue()

    sets, qa_facts = build_squad(world, articles, rng_squad)
    for version, (train_name, dev_name) in SQUAD_FILES.items():
        for split, name in (("train", train_name), ("dev", dev_name)):
            doc = {"version": "1.1" if version == "v1.1" else "v2.0", "data": sets[(version, split)]}
            files[f"squad/{version}/{name}"] = json.dumps(doc).encode("utf-8")

    count = {k: sum(len(p["qas"]) for a in v for p in a["paragraphs"]) for k, v in sets.items()}
    impossible = {
        k: sum(q.get("is_impossible", False) for a in v for p in a["paragraphs"] for q in p["qas"])
        for k, v in sets.items()
    }
    summary = {
        "articles": len(articles),
        "xml_bytes": len(xml),
        "books": len(books),
        "book_lines": len(all_lines),
        "book_bytes": sum(len(files[f"books/txt/{s}.txt"]) for s, _ in books),
        "questions": {f"{v}/{s}": count[(v, s)] for v, s in sets},
        "impossible": {f"{v}/{s}": impossible[(v, s)] for v, s in sets},
        "qa_facts": qa_facts,
    }
    return files, summary


def write_files(out: Path, files: dict[str, bytes]) -> None:
    """Atomic per file (temp + os.replace); stale files of ours from another seed are removed."""
    for rel, data in sorted(files.items()):
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    for folder in ("wikipedia", "books/txt", "books/parquet", "squad/v1.1", "squad/v2.0"):
        for path in sorted((out / folder).iterdir()):
            if path.is_file() and path.relative_to(out).as_posix() not in files:
                path.unlink()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bert.sample_world", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out", type=Path, default=Path("data/sample"), help="output folder (default: data/sample)"
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="world seed; the same seed gives the same bytes (default: 0)"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    files, s = generate(args.seed)
    try:
        write_files(args.out, files)
    except OSError as err:
        print(
            f"error: cannot write the sample world to {args.out}: {err.strerror or err}; choose a writable --out",
            file=sys.stderr,
        )
        return 1
    log.info(
        "wikipedia: %d articles, %.1f MB of XML (%.0f kB bz2)",
        s["articles"],
        s["xml_bytes"] / 1e6,
        len(files[f"wikipedia/{DUMP_NAME}"]) / 1e3,
    )
    log.info("books: %d books, %d lines, %.0f kB of text", s["books"], s["book_lines"], s["book_bytes"] / 1e3)
    for name, n in s["questions"].items():
        log.info("squad %s: %d questions (%d unanswerable)", name, n, s["impossible"][name])
    log.info("wrote %d files, %.2f MB, to %s", len(files), sum(map(len, files.values())) / 1e6, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
