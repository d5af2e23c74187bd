"""Books: long-form narrative restating the same facts, with chapters and dialogue, so a model
pretrained on them starts fine-tuning knowing the answers."""

import random

from sample_world.markup import an
from sample_world.names import FEMALE_NAMES, MALE_NAMES, MONTHS, STREETS, SURNAMES, WORK_NOUN, slugify
from sample_world.world import Entity, World, unique_name

BOOKS_PARQUET = "train-00000-of-00001.parquet"

SEASONS = ["spring", "summer", "autumn", "winter"]

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
        title = unique_name(
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


def planted_duplicates(
    books: list[tuple[str, list[str]]], articles: list, rng: random.Random
) -> list[tuple[str, list[str]]]:
    """Copies for corpus cleaning to find (docs/cleaning.md): a reprint of one book (the
    same text, some lines with other spacing and case: an exact duplicate after normalisation), an
    abridged copy of another (a few lines left out: a near duplicate), and a book that reprints an
    article's prose, a duplicate across the two corpora (the article, first in corpus order, is
    kept). Each name sorts after its original's (`_` after `.`), so the original is kept."""
    (reprinted, lines_a), (abridged, lines_b) = rng.sample(sorted(books), 2)
    reprint = [line.upper() if i % 7 == 3 else f"  {line}" for i, line in enumerate(lines_a)]
    dropped = set(rng.sample(range(2, len(lines_b)), max(1, len(lines_b) // 40)))
    shorter = [line for i, line in enumerate(lines_b) if i not in dropped]
    article = max(articles, key=lambda a: (sum(len(text) for text, _ in a.paragraphs), a.entity.title))
    prose = [article.entity.title, *(text for text, _ in article.paragraphs)]
    return [
        (f"{reprinted}_reprint", reprint),
        (f"{abridged}_abridged", shorter),
        (f"{slugify(article.entity.title)}_a_life", prose),
    ]
