"""What an article says about each kind of entity: its prose paragraphs, under their headings,
stating the facts SQuAD asks about, and a last paragraph of colour that no question is about."""

import random

from sample_world.markup import REF, B, L, Paragraph, Piece, T, an, fact
from sample_world.names import STREETS, SURNAMES, slugify
from sample_world.world import Entity, World

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
