"""The world: entities with facts, from one seed. `facts` maps a relation to the exact text that
states it (what the prose writes, the books restate and SQuAD asks about); `attrs` holds the
rest (links to other entities, pronouns, dates)."""

import random
from dataclasses import dataclass, field

from sample_world.names import (
    AWARDS,
    COUNTRIES,
    FEMALE_NAMES,
    KNOWN_FOR,
    MALE_NAMES,
    MONTHS,
    MOUNTAINS,
    OCCUPATIONS,
    ORG_KINDS,
    RIVERS,
    SPECIAL_TOWNS,
    SURNAMES,
    TOWN_HEADS,
    TOWN_TAILS,
    WORK_ADJ,
    WORK_NOUN,
)

DEV_FRACTION = 0.16  # of each kind of entity but countries: only dev questions ask about these


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


def unique_name(rng: random.Random, make, taken: set[str]) -> str:
    """A name from `make` (which draws from `rng`) that is not `taken` yet; it is taken now."""
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
            else unique_name(rng, lambda: rng.choice(TOWN_HEADS) + rng.choice(TOWN_TAILS), titles)
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
        name = unique_name(rng, lambda g=given, s=suffix: f"{g} {rng.choice(SURNAMES)}{s}", titles)
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
            p.facts["work"] = unique_name(
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
        name = unique_name(
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
