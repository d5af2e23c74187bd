"""GLUE, as download_glue_data.py writes it: CoLA, SST-2, MRPC, STS-B, QQP, MNLI, QNLI and RTE,
tab-separated, unquoted, each task in its folder with the real file names and headers.

Every set is built from the sample world, so a model pretrained on its wiki and books meets
fine-tuning text about things it has read:

  CoLA   the articles' sentences (acceptable) and corruptions of them (a swapped word order,
         broken agreement, a dropped or doubled function word, a wrong preposition)
  SST-2  reviews of the world's works and festivals from positive and negative phrase lists,
         lower-cased and tokenised as SST is
  MRPC   a fact as the article states it and as the books restate it (paraphrase), or beside
         another fact of the entity or the same relation with another value (not)
  STS-B  the same kinds of pairs, graded 5 (same facts) down to 0 (unrelated things)
  QQP    two of SQuAD's question templates about the same fact (duplicate), or about another
         relation or another entity (not)
  MNLI   premises of facts; hypotheses a paraphrase of one (entailment), the same relation with
         another value (contradiction) or a fact the premise does not state (neutral)
  QNLI   SQuAD v1.1's questions and a sentence of their paragraph, as QNLI was made
  RTE    an article paragraph and a restated fact: stated there, or wrong or not stated

The two sides of a pair always come from the same pools of phrasings (statements.py), whatever
the label, so templates and lengths give nothing away; the label follows from the facts. Dev rows
are about the held-out entities, as SQuAD dev is. Each task draws from its own seeded stream."""

import random
import re
from dataclasses import dataclass

from sample_world.articles import Article
from sample_world.markup import an
from sample_world.names import FEMALE_NAMES, MALE_NAMES
from sample_world.squad import question_fields, question_templates
from sample_world.statements import (
    Statement,
    book_statements,
    can_swap,
    peers,
    split_sentences,
    standalone,
    the,
    wiki_statements,
    wrong_value,
)
from sample_world.world import Entity, World

SIZES = {"train": 600, "dev": 200}
MNLI_PROMPTS = {"train": 300, "dev_matched": 67, "dev_mismatched": 67}  # three hypotheses each
MNLI_GENRES = {
    "train": ("encyclopedia", "fiction"),
    "dev_matched": ("encyclopedia", "fiction"),
    "dev_mismatched": ("letters", "travel"),
}
MNLI_LABELS = ("entailment", "neutral", "contradiction")
# The header lines, as the real files have them (MRPC's begins with a UTF-8 byte order mark).
MNLI_COLUMNS = (
    "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse"
    "\tsentence1_parse\tsentence2_parse\tsentence1\tsentence2"
)
HEADERS = {
    "SST-2": "sentence\tlabel",
    "MRPC": "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String",
    "STS-B": "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore",
    "QQP": "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate",
    "QNLI": "index\tquestion\tsentence\tlabel",
    "RTE": "index\tsentence1\tsentence2\tlabel",
    "MNLI/train": MNLI_COLUMNS + "\tlabel1\tgold_label",
    "MNLI/dev": MNLI_COLUMNS + "\tlabel1\tlabel2\tlabel3\tlabel4\tlabel5\tgold_label",
}
COLA_ACCEPTABLE = 0.7  # as in CoLA
MRPC_PARAPHRASE = 0.68  # as in MRPC
QQP_DUPLICATE = 0.37  # as in QQP
QQP_MALFORMED = 2  # rows of train.tsv cut short, as real QQP has; readers skip them


def tsv(rows: list[list[str]], header: str | None = None) -> bytes:
    """Tab-separated and unquoted, '\\n' line ends: no field may hold a tab, a line break or a
    double quote (which a quoting reader would take for the start of a quoted field)."""
    lines = ([header.split("\t")] if header else []) + rows
    for row in lines:
        for field in row:
            if re.search(r'[\t\r\n"]', field):
                raise ValueError(f"unsafe TSV field {field!r}")
    return "".join("\t".join(row) + "\n" for row in lines).encode("utf-8")


def label_order(n: int, shares: dict, rng: random.Random) -> list:
    """n labels in the given shares (the last label takes the rounding), in a seeded order."""
    labels, items = [], list(shares.items())
    for label, share in items[:-1]:
        labels += [label] * round(n * share)
    labels += [items[-1][0]] * (n - len(labels))
    rng.shuffle(labels)
    return labels


def fill(labels: list, pool: list, make, rng: random.Random) -> list[list[str]]:
    """One row per label: from the next item of the (reshuffled, reused when spent) pool that
    `make(item, label)` can turn into a row of that label that is not there yet."""
    rows, seen, queue = [], set(), []
    for label in labels:
        for _ in range(4 * len(pool)):
            if not queue:
                queue = list(pool)
                rng.shuffle(queue)
            row = make(queue.pop(), label)
            if row is not None and tuple(row) not in seen:
                seen.add(tuple(row))
                rows.append(row)
                break
        else:
            raise RuntimeError(f"the pool cannot make a row labelled {label!r}")
    return rows


@dataclass
class Pools:
    """What the sets draw on, per entity key: the article's sentences as written (`sentences`),
    those that state facts made to stand alone (`wiki`), and the books' statements (`book`)."""

    entities: dict[str, list[Entity]]  # "train" | "dev" -> the entities of that split
    sentences: dict[str, list[Statement]]
    wiki: dict[str, list[Statement]]
    book: dict[str, list[Statement]]


def build_pools(w: World, articles: list[Article]) -> Pools:
    pools = Pools({"train": [], "dev": []}, {}, {}, {})
    for article in articles:
        e = article.entity
        if e.kind == "country":
            continue  # too few to hold out, as in SQuAD
        pools.entities["dev" if e.dev else "train"].append(e)
        pools.sentences[e.key] = wiki_statements(article)
        named = [standalone(st) for st in pools.sentences[e.key] if st.facts]
        pools.wiki[e.key] = [st for st in named if st]
        pools.book[e.key] = book_statements(w, e)
    return pools


def within(h: Statement, facts: dict) -> bool:
    """All of `h`'s facts are among `facts`, with the same values."""
    return all(facts.get(r) == v for r, v in h.values.items())


def disjoint(h: Statement, facts: dict) -> bool:
    return not set(h.values) & set(facts)


def contradicting(w: World, h: Statement, facts: dict, rng: random.Random) -> Statement | None:
    """`h` (about `facts`' relations) with one of them given another entity's value."""
    if not within(h, facts):
        return None
    swappable = [r for r in h.values if can_swap(w, h.subject, r)]
    if not swappable:
        return None
    relation = rng.choice(swappable)
    return h.with_value(relation, wrong_value(w, h.subject, relation, rng))


# --- CoLA ---------------------------------------------------------------------------------------

COLA_SOURCES = dict(person="sw01", town="sw02", organisation="sw03", university="sw04", event="sw05")
FUNCTION_WORDS = {
    "the",
    "a",
    "an",
    "of",
    "in",
    "at",
    "by",
    "to",
    "for",
    "on",
    "was",
    "is",
    "and",
    "its",
    "it",
}
DOUBLED = {"the", "of", "in", "was", "is", "a", "to"}
# the sentences' subjects are singular: these verbs made plural break the agreement
AGREEMENT = {
    "was": "were",
    "is": "are",
    "has": "have",
    "lies": "lie",
    "stands": "stand",
    "hosts": "host",
    "holds": "hold",
}
WRONG_PREPOSITIONS = [
    (r"\bin (\d{4})\b", r"on \1"),
    (r"\bfounded by\b", "founded of"),
    (r"\b(known|remembered) for\b", r"\1 of"),
    (r"\bat the foot of\b", "at the foot by"),
    (r"\bbased in\b", "based of"),
    (r"\bon the river\b", "at the river"),
]


def _swap_order(words, rng):
    """A function word and the word after it change places: "was born in" -> "born was in"."""
    spots = [
        i
        for i in range(1, len(words) - 1)
        if words[i] in FUNCTION_WORDS
        and words[i + 1].isalpha()
        and words[i + 1].islower()
        and words[i + 1] not in FUNCTION_WORDS
    ]
    if not spots:
        return None
    i = rng.choice(spots)
    return words[:i] + [words[i + 1], words[i]] + words[i + 2 :]


def _break_agreement(words, rng):
    """The verb made plural for a singular subject: "St. Aldric are a town"."""
    spots = [i for i, word in enumerate(words) if word in AGREEMENT]
    return words[: spots[0]] + [AGREEMENT[words[spots[0]]]] + words[spots[0] + 1 :] if spots else None


def _drop_word(words, rng):
    """A preposition (or "the" before a common noun) goes missing: "was born Belfield"."""
    spots = [
        i
        for i in range(1, len(words) - 1)
        if words[i] in ("of", "by", "in") or (words[i] == "the" and words[i + 1].islower())
    ]
    if not spots:
        return None
    i = rng.choice(spots)
    return words[:i] + words[i + 1 :]


def _double_word(words, rng):
    """A function word written twice: "the the town"."""
    spots = [i for i in range(1, len(words)) if words[i] in DOUBLED]
    if not spots:
        return None
    i = rng.choice(spots)
    return words[: i + 1] + words[i:]


def _wrong_preposition(words, rng):
    """A preposition the verb or noun does not take: "on 1857", "founded of"."""
    text = " ".join(words)
    options = [(p, r) for p, r in WRONG_PREPOSITIONS if re.search(p, text)]
    if not options:
        return None
    pattern, replacement = rng.choice(options)
    return re.sub(pattern, replacement, text, count=1).split(" ")


CORRUPTIONS = [_swap_order, _break_agreement, _drop_word, _double_word, _wrong_preposition]


def corrupt(sentence: str, rng: random.Random) -> str | None:
    words = sentence[:-1].split(" ")  # the full stop stays where it is
    for how in rng.sample(CORRUPTIONS, len(CORRUPTIONS)):
        out = how(words, rng)
        if out and out != words:
            return " ".join(out) + sentence[-1]
    return None


def cola(w: World, pools: Pools, rng: random.Random) -> dict[str, bytes]:
    """Sentences the articles write (label 1, no mark) or a corruption of one (label 0, "*");
    a sentence is used once, in one split (the filler sentences many articles share too)."""
    files, used, taken = {}, set(), set()
    for split, name in (("train", "train.tsv"), ("dev", "dev.tsv")):
        pool = []
        for e in pools.entities[split]:
            for st in pools.sentences[e.key]:
                text = st.text
                if (
                    4 <= len(text.split()) <= 30
                    and "(" not in text
                    and text.endswith(".")
                    and text not in used
                ):
                    used.add(text)
                    pool.append((COLA_SOURCES[e.kind], text))

        def make(item, label):
            source, text = item
            row = [source, "1", "", text] if label == 1 else None
            if label == 0:
                bad = corrupt(text, rng)
                row = [source, "0", "*", bad] if bad and bad not in used else None
            if row is None or text in taken:
                return None
            taken.add(text)  # as itself or corrupted, never both
            return row

        labels = label_order(SIZES[split], {1: COLA_ACCEPTABLE, 0: 1 - COLA_ACCEPTABLE}, rng)
        rows = fill(labels, pool, make, rng)
        files[f"CoLA/{name}"] = tsv(rows)  # CoLA has no header
    return files


# --- SST-2 --------------------------------------------------------------------------------------

POSITIVE = {
    "adj": [
        "charming", "affecting", "luminous", "generous", "witty", "gripping", "tender", "assured",
        "moving", "exhilarating", "graceful", "vivid", "heartfelt", "wise", "beautiful", "lively",
    ],
    "vp": [
        "rewards every minute of attention", "earns every bit of its reputation", "lingers long after it ends",
        "never loses its nerve", "is a pleasure from start to finish", "finds something new in familiar material",
    ],
}  # fmt: skip
NEGATIVE = {
    "adj": [
        "tedious", "clumsy", "shallow", "lifeless", "muddled", "joyless", "pretentious", "flat",
        "dreary", "sloppy", "forgettable", "hollow", "overwrought", "dull", "tiresome", "bland",
    ],
    "vp": [
        "never finds its footing", "wears out its welcome", "is a chore to sit through",
        "collapses under its own weight", "leaves no impression at all", "mistakes length for depth",
    ],
}  # fmt: skip
ADVERBS = ["often", "quietly", "consistently", "surprisingly", "oddly", "thoroughly"]
NOUNS = ["piece of work", "portrait", "account", "study", "affair", "effort"]
PLACES = ["river", "harbour", "old town", "winters", "market square", "workshops"]
# The polarity words decide the label; the clause after "but" and "never" show that word order does.
SST_TEMPLATES = [
    "{np} is {an_adj} {noun}.",
    "{np} is {an_adj} and {adv} {adj2} portrait of {town}'s {place}.",
    "{np} {vp}.",
    "{np} starts out {opposite} but {vp}.",
    "{np} is never {opposite}.",
    "{np} is as {adj} as it is {adj2}.",
    "even at its most {opposite}, {np} {vp}.",
]


def sst_style(text: str) -> str:
    """SST's text: lower case, PTB tokens ("lindqvist 's", "is n't", "-lrb-"), spaced punctuation."""
    text = text.lower().replace("(", " -lrb- ").replace(")", " -rrb- ")
    text = re.sub(r"(\w)n't\b", r"\1 n't", text)
    text = re.sub(r"(\w)'s\b", r"\1 's", text)
    text = re.sub(r"(\w)' ", r"\1 ' ", text)
    text = re.sub(r"([,;:!?])", r" \1 ", text)
    text = re.sub(r"\.$", " .", text)  # the sentence's full stop; "st. aldric" keeps its own
    return " ".join(text.split()) + " "


def sst_subjects(entities: list[Entity]) -> list[tuple[list[str], Entity]]:
    """(ways to name it, its town) for each work of a person and each festival or exhibition."""
    found = []
    for e in entities:
        if e.kind == "person" and "work" in e.facts:
            kind, work = e.attrs["work_kind"], e.facts["work"]
            found.append(([f"{e.title}'s {kind} {work}", work, f"{e.title}'s {work}"], e.attrs["birthplace"]))
        elif e.kind == "event" and e.attrs["style"] in ("festival", "exhibition"):
            found.append(([f"the {e.title}"], e.attrs["town"]))
    return found


def sst2(w: World, pools: Pools, rng: random.Random) -> dict[str, bytes]:
    """Reviews of the world's works and festivals; the label is the polarity of the phrases."""
    files = {}
    for split in ("train", "dev"):
        pool = sst_subjects(pools.entities[split])

        def make(item, label):
            names, town = item
            good, bad = (POSITIVE, NEGATIVE) if label else (NEGATIVE, POSITIVE)
            adj, adj2 = rng.sample(good["adj"], 2)
            template = rng.choice(SST_TEMPLATES)
            text = template.format(
                np=rng.choice(names),
                adj=adj,
                adj2=adj2,
                an_adj=an(adj),
                noun=rng.choice(NOUNS),
                adv=rng.choice(ADVERBS),
                vp=rng.choice(good["vp"]),
                opposite=rng.choice(bad["adj"]),
                town=town.title,
                place=rng.choice(PLACES),
            )
            return [sst_style(text), str(label)]

        rows = fill(label_order(SIZES[split], {1: 0.5, 0: 0.5}, rng), pool, make, rng)
        files[f"SST-2/{split}.tsv"] = tsv(rows, HEADERS["SST-2"])
    return files


# --- MRPC and STS-B -----------------------------------------------------------------------------


def paraphrase_pool(pools: Pools, split: str) -> list[tuple[Entity, Statement]]:
    return [(e, a) for e in pools.entities[split] for a in pools.wiki[e.key]]


def mrpc(w: World, pools: Pools, rng: random.Random) -> dict[str, bytes]:
    """One sentence states facts as the article does, the other (first or second) as the books do:
    the same facts or some of them (paraphrase), another fact of the entity, or the same facts with
    one value another entity's (not). IDs name sentences, as MRPC's do."""
    files, ids, taken = {}, {}, set()

    def sentence_id(text: str) -> str:
        while text not in ids:
            candidate = rng.randrange(100_000, 4_000_000)
            if candidate not in taken:
                taken.add(candidate)
                ids[text] = str(candidate)
        return ids[text]

    for split in ("train", "dev"):

        def make(item, label):
            e, a = item
            facts, books = a.values, pools.book[e.key]
            same = [b for b in books if within(b, facts)]
            if label == 1:
                b = rng.choice(same) if same else None
            elif rng.random() < 0.5:
                others = [b for b in books if disjoint(b, facts)]
                b = rng.choice(others) if others else None
            else:
                b = contradicting(w, rng.choice(same), facts, rng) if same else None
            if b is None:
                return None
            one, two = (a.text, b.text) if rng.random() < 0.5 else (b.text, a.text)
            return [str(label), sentence_id(one), sentence_id(two), one, two]

        labels = label_order(SIZES[split], {1: MRPC_PARAPHRASE, 0: 1 - MRPC_PARAPHRASE}, rng)
        rows = fill(labels, paraphrase_pool(pools, split), make, rng)
        files[f"MRPC/{split}.tsv"] = tsv(rows, HEADERS["MRPC"])
    return files


STS_GENRES = ["main-news", "main-captions", "main-forum"]
STS_ANNOTATORS = 5  # a score is their mean, so it moves in steps of 0.2 as STS-B's do


def sts_pair(w: World, pools: Pools, e: Entity, a: Statement, grade: int, rng) -> Statement | None:
    """A books' statement that is `grade` similar to the article's statement `a`:
    5 the same facts; 4 the same facts but one detail (a fact more or less, or one value differs);
    3 the same entity and relations, other values; 2 the same entity, other relations;
    1 another entity of the kind, the same relation; 0 something of another kind."""
    facts, books = a.values, pools.book[e.key]
    if grade == 5:
        options = [b for b in books if b.values == facts]
    elif grade == 4:
        options = [b for b in books if within(b, facts) and b.values != facts and len(b.values) < len(facts)]
        options += [b for b in books if len(b.values) > len(facts) and within(a, b.values)]
        if len(facts) > 1:
            options += [c for b in books if b.values == facts for c in [contradicting(w, b, facts, rng)] if c]
    elif grade == 3:
        options = []
        for b in (b for b in books if within(b, facts)):
            if all(can_swap(w, e, r) for r in b.values):
                for r in b.values:
                    b = b.with_value(r, wrong_value(w, e, r, rng))
                options.append(b)
    elif grade == 2:
        options = [b for b in books if disjoint(b, facts)]
    elif grade == 1:
        others = [x for x in peers(w, e) if x.dev == e.dev]  # dev pairs stay among held-out entities
        options = [b for x in others for b in pools.book[x.key] if set(b.values) & set(facts)]
    else:
        split = "dev" if e.dev else "train"
        options = [b for x in pools.entities[split] if x.kind != e.kind for b in pools.book[x.key]]
    return rng.choice(options) if options else None


def stsb(w: World, pools: Pools, rng: random.Random) -> dict[str, bytes]:
    files = {}
    for split in ("train", "dev"):

        def make(item, grade):
            e, a = item
            b = sts_pair(w, pools, e, a, grade, rng)
            if b is None:
                return None
            votes = [min(5, max(0, grade + rng.choice([-1, 0, 0, 0, 0, 1]))) for _ in range(STS_ANNOTATORS)]
            one, two = (a.text, b.text) if rng.random() < 0.5 else (b.text, a.text)
            return [rng.choice(STS_GENRES), one, two, f"{sum(votes) / STS_ANNOTATORS:.3f}"]

        grades = label_order(SIZES[split], {g: 1 / 6 for g in range(6)}, rng)
        rows = fill(grades, paraphrase_pool(pools, split), make, rng)
        rows = [
            [str(i), genre, "samplewiki", "2026", f"{i + 1:04d}", "none", "none", one, two, score]
            for i, (genre, one, two, score) in enumerate(rows)
        ]
        files[f"STS-B/{split}.tsv"] = tsv(rows, HEADERS["STS-B"])
    return files


# --- QQP ----------------------------------------------------------------------------------------


def qqp(w: World, pools: Pools, rng: random.Random) -> dict[str, bytes]:
    """Two of SQuAD's phrasings of one question (duplicate), or a question about another relation
    of the entity or the same relation of another entity (not), always two different templates."""
    files, qids = {}, {}

    def qid(question: str) -> str:
        """A question's ID, the same wherever it appears, as in QQP."""
        return str(qids.setdefault(question, len(qids) + 1))

    def asked(e: Entity, template: str) -> str:
        return template.format(**question_fields(e))

    for split in ("train", "dev"):
        pool = [(e, r) for e in pools.entities[split] for r in e.facts if len(question_templates(e, r)) > 1]

        def make(item, label):
            e, relation = item
            first, second = rng.sample(question_templates(e, relation), 2)
            if label == 1:
                one, two = asked(e, first), asked(e, second)
            elif rng.random() < 0.5:
                others = [r for r in e.facts if r != relation and question_templates(e, r)]
                one, two = asked(e, first), asked(e, rng.choice(question_templates(e, rng.choice(others))))
            else:
                others = [x for x in peers(w, e) if relation in x.facts and x.dev == e.dev]
                x = rng.choice(others)
                templates = [t for t in question_templates(x, relation) if t != first]
                one, two = asked(e, first), asked(x, rng.choice(templates))
            if one == two:
                return None
            return [one, two, str(label)] if rng.random() < 0.5 else [two, one, str(label)]

        rows = fill(label_order(SIZES[split], {1: QQP_DUPLICATE, 0: 1 - QQP_DUPLICATE}, rng), pool, make, rng)
        ids = rng.sample(range(1, 20 * len(rows)), len(rows) + QQP_MALFORMED)
        rows = [[str(i), qid(one), qid(two), one, two, label] for i, (one, two, label) in zip(ids, rows)]
        if split == "train":
            for i in ids[len(rows) :]:  # question2 and is_duplicate lost, as when a raw newline broke a row
                e, relation = rng.choice(pool)
                question = asked(e, rng.choice(question_templates(e, relation)))
                rows.insert(rng.randrange(len(rows)), [str(i), qid(question), qid(f"lost {i}"), question])
        files[f"QQP/{split}.tsv"] = tsv(rows, HEADERS["QQP"])
    return files


# --- MNLI ---------------------------------------------------------------------------------------

GENRE_SOURCES = {  # genre -> (premise source, hypothesis source)
    "encyclopedia": ("wiki", "book"),
    "fiction": ("book", "wiki"),
    "letters": ("book", "wiki"),
    "travel": ("wiki", "book"),
}
WRAPPERS = {  # the mismatched genres frame the same statements differently
    "letters": [
        "Dear {friend}, you asked me about {name}. {premise} With best wishes, {sender}.",
        "My dear {friend}, I have been reading about {name} again. {premise} Write soon.",
    ],
    "travel": [
        "Visitors to {town} often hear about {name}. {premise}",
        "The guidebook to {town} has a short entry on {name}: {premise}",
    ],
}
DETERMINERS = {"the", "a", "an"}
PREPOSITIONS = {"in", "of", "at", "by", "for", "on", "from", "to", "with", "after", "during", "as", "near"}
PRONOUNS = {"he", "she", "it", "they", "him", "her", "you", "me", "i"}
VERBS = {
    "was",
    "is",
    "were",
    "are",
    "had",
    "has",
    "died",
    "led",
    "founded",
    "married",
    "came",
    "worked",
    "lies",
    "rose",
}


def tokens(sentence: str) -> list[str]:
    """PTB-like tokens: "Lindqvist 's", "St." and "Jr." whole, punctuation apart."""
    return re.findall(
        r"(?:Dr|Mr|Mrs|St|Mt|Jr)\.|U\.S\.|e\.g\.|\d+(?:,\d+)*|'s\b|[^\W\d_]+(?:-[^\W\d_]+)*|\S", sentence
    )


def _right_branching(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"( {items[0]} {_right_branching(items[1:])} )"


def _subject_length(words: list[str]) -> int:
    """The subject ends at the first lower-case word that does not join a name ("of", "the")."""
    for i, word in enumerate(words[1:], 1):
        joins = word in ("of", "the", "da", "de") and i + 1 < len(words) and words[i + 1][:1].isupper()
        if word[:1].islower() and not joins:
            return i
    return 1


def _tag(word: str) -> str:
    lower = word.lower()
    if not word[0].isalnum():
        return {"'s": "POS", "-LRB-": "-LRB-", "-RRB-": "-RRB-"}.get(word, word if word in ".,:;" else ":")
    if lower in DETERMINERS:
        return "DT"
    if lower in PREPOSITIONS:
        return "IN"
    if lower == "and":
        return "CC"
    if lower in PRONOUNS:
        return "PRP"
    if lower in ("his", "its", "their", "my"):
        return "PRP$"
    if word[0].isdigit():
        return "CD"
    if word[0].isupper():
        return "NNP"
    if lower in VERBS or lower.endswith("ed"):
        return "VBD"
    return "NNS" if lower.endswith("s") else "NN"


def parses(text: str) -> tuple[str, str]:
    """A simplified (binary parse, parse) of MNLI's kind: subject and right-branching predicate,
    "( ( Anna Berg ) ( was ( born ( in Tollby ) ) ) . )", and "(ROOT (S (NP ...) (VP ...) (. .)))"."""
    binary, full = [], []
    for start, end in split_sentences(text):
        words = [{"(": "-LRB-", ")": "-RRB-"}.get(t, t) for t in tokens(text[start:end])]
        stop = [words.pop()] if words and words[-1] in ".?!:" else []
        n = _subject_length(words) if len(words) > 1 else len(words)
        subject, predicate = words[:n], words[n:]
        parts = [_right_branching(subject)] + ([_right_branching(predicate)] if predicate else [])
        binary.append("( " + " ".join(parts + stop) + " )")
        np = "(NP " + " ".join(f"({_tag(t)} {t})" for t in subject) + ")"
        vp = " (VP " + " ".join(f"({_tag(t)} {t})" for t in predicate) + ")" if predicate else ""
        full.append(f"(S {np}{vp}" + "".join(f" (. {t})" for t in stop) + ")")
    if len(binary) == 1:
        return binary[0], f"(ROOT {full[0]})"
    return "( " + " ".join(binary) + " )", "(ROOT (S " + " ".join(full) + "))"


def mnli_premise(w: World, pools: Pools, e: Entity, genre: str, rng) -> tuple[str, dict, str] | None:
    """(premise text, the facts it states, the source its hypotheses come from)."""
    source, other = GENRE_SOURCES[genre]
    statements = (pools.wiki if source == "wiki" else pools.book)[e.key]
    if not statements:
        return None
    k = min(len(statements), rng.choice([1, 2]))
    if source == "wiki":
        start = rng.randrange(len(statements) - k + 1)
        chosen = statements[start : start + k]  # neighbours: an article's sentences in order
    else:  # the books' statements overlap ("born in 1857" alone and with the birthplace): no repeats
        chosen = [rng.choice(statements)]
        rest = [st for st in statements if disjoint(st, chosen[0].values)]
        chosen += rng.sample(rest, min(k - 1, len(rest)))
    facts = {}
    for st in chosen:
        facts.update(st.values)
    premise = " ".join(st.text for st in chosen)
    if genre in WRAPPERS:
        towns = [t for t in w.towns if t.title not in e.facts.values() and t.title not in e.title]
        premise = rng.choice(WRAPPERS[genre]).format(
            friend=rng.choice(FEMALE_NAMES + MALE_NAMES),
            sender=rng.choice(FEMALE_NAMES + MALE_NAMES),
            name=the(e),
            town=rng.choice(towns).title,
            premise=premise,
        )
    return premise, facts, other


def mnli_hypotheses(w: World, pools: Pools, e: Entity, facts: dict, source: str, rng) -> dict | None:
    """One hypothesis per label from the other source's statements of `e`, or None."""
    statements = (pools.wiki if source == "wiki" else pools.book)[e.key]
    stated = [h for h in statements if within(h, facts)]
    unstated = [h for h in statements if disjoint(h, facts)]
    if not stated or not unstated:
        return None
    contradiction = contradicting(w, rng.choice(stated), facts, rng)
    if contradiction is None:
        return None
    return {
        "entailment": rng.choice(stated).text,
        "neutral": rng.choice(unstated).text,
        "contradiction": contradiction.text,
    }


def mnli(w: World, pools: Pools, rng: random.Random) -> dict[str, bytes]:
    """Three hypotheses a premise, one per label, as MNLI's writers wrote them; pairID is the
    promptID and the label's initial, as in MNLI (no reader uses it as input)."""
    files, prompt_ids = {}, rng.sample(range(10_000, 150_000), sum(MNLI_PROMPTS.values()))
    for name, n_prompts in MNLI_PROMPTS.items():
        split = "train" if name == "train" else "dev"
        genres = MNLI_GENRES[name]
        pool = [(e, g) for e in pools.entities[split] for g in genres]
        rows, seen, queue, attempts = [], set(), [], 0
        while len(rows) < 3 * n_prompts:
            attempts += 1
            if attempts > 50 * len(pool):
                raise RuntimeError(f"MNLI {name}: too few premises")
            if not queue:
                queue = list(pool)
                rng.shuffle(queue)
            e, genre = queue.pop()
            if genre != genres[(len(rows) // 3) % 2]:
                continue  # the two genres take turns, so each has half the prompts
            made = mnli_premise(w, pools, e, genre, rng)
            hypotheses = made and mnli_hypotheses(w, pools, e, made[1], made[2], rng)
            if not hypotheses or made[0] in seen:
                continue
            premise = made[0]
            seen.add(premise)
            prompt = str(prompt_ids.pop())
            for label in MNLI_LABELS:
                hypothesis = hypotheses[label]
                annotators = []
                if name != "train":  # four more annotators; at most one disagrees, so gold is the majority
                    annotators = [label] * 4
                    if rng.random() < 0.4:
                        annotators[rng.randrange(4)] = rng.choice([x for x in MNLI_LABELS if x != label])
                (premise_binary, premise_parse), (hypothesis_binary, hypothesis_parse) = map(
                    parses, (premise, hypothesis)
                )
                rows.append(
                    [prompt, prompt + label[0], genre, premise_binary, hypothesis_binary, premise_parse]
                    + [hypothesis_parse, premise, hypothesis, label, *annotators, label]
                )
        rng.shuffle(rows)
        header = HEADERS["MNLI/train" if name == "train" else "MNLI/dev"]
        files[f"MNLI/{name}.tsv"] = tsv([[str(i)] + row for i, row in enumerate(rows)], header)
    return files


# --- QNLI and RTE -------------------------------------------------------------------------------


def _clean(text: str) -> str:
    return text.replace('"', "").replace("\u00a0", " ")


def qnli(squad_sets: dict, rng: random.Random) -> dict[str, bytes]:
    """Each SQuAD v1.1 question with one sentence of its paragraph: the sentence holding the answer
    (entailment) or one that does not contain it (not_entailment); train from train, dev from dev."""
    files = {}
    for split in ("train", "dev"):
        pool = []
        for article in squad_sets[("v1.1", split)]:
            for paragraph in article["paragraphs"]:
                context = paragraph["context"]
                sentences = [context[s:t] for s, t in split_sentences(context)]
                answers = [qa["answers"][0]["text"] for qa in paragraph["qas"]]
                for qa in paragraph["qas"]:
                    answer = qa["answers"][0]["text"]
                    start = qa["answers"][0]["answer_start"]
                    holding = next(context[s:t] for s, t in split_sentences(context) if s <= start < t)
                    # the other sentences that answer something: facts too, so the sentence alone
                    # does not tell (colour like "The climate is mild." never holds an answer)
                    others = [x for x in sentences if answer not in x and any(a in x for a in answers)]
                    pool.append((qa["question"], holding, others))

        def make(item, label):
            question, holding, others = item
            if label == "entailment":
                return [question, _clean(holding), label]
            return [question, _clean(rng.choice(others)), label] if others else None

        labels = label_order(SIZES[split], {"entailment": 0.5, "not_entailment": 0.5}, rng)
        rows = fill(labels, pool, make, rng)
        files[f"QNLI/{split}.tsv"] = tsv([[str(i)] + row for i, row in enumerate(rows)], HEADERS["QNLI"])
    return files


def rte(w: World, pools: Pools, rng: random.Random) -> dict[str, bytes]:
    """An article paragraph (its first sentence made to name the subject) and a fact as the books
    state it: one the paragraph states (entailment), or one with a wrong value or one the
    paragraph does not state (not_entailment, half each)."""
    files = {}
    for split in ("train", "dev"):
        pool = []
        for e in pools.entities[split]:
            sentences = pools.sentences[e.key]
            for p in sorted({st.paragraph for st in sentences if st.facts}):
                paragraph = [st for st in sentences if st.paragraph == p]
                first = standalone(paragraph[0])
                if first is not None:
                    facts = {r: v for st in paragraph for r, v in st.values.items()}
                    pool.append((e, " ".join(st.text for st in [first] + paragraph[1:]), facts))

        def make(item, label):
            e, premise, facts = item
            books = pools.book[e.key]
            stated = [b for b in books if within(b, facts)]
            if label == "entailment":
                h = rng.choice(stated) if stated else None
            elif rng.random() < 0.5:
                h = contradicting(w, rng.choice(stated), facts, rng) if stated else None
            else:
                unstated = [b for b in books if disjoint(b, facts)]
                h = rng.choice(unstated) if unstated else None
            return [premise, h.text, label] if h else None

        labels = label_order(SIZES[split], {"entailment": 0.5, "not_entailment": 0.5}, rng)
        rows = fill(labels, pool, make, rng)
        files[f"RTE/{split}.tsv"] = tsv([[str(i)] + row for i, row in enumerate(rows)], HEADERS["RTE"])
    return files


GLUE_TASKS = {
    "CoLA": cola,
    "SST-2": sst2,
    "MRPC": mrpc,
    "STS-B": stsb,
    "QQP": qqp,
    "MNLI": mnli,
    "RTE": rte,
}


GLUE_FOLDERS = [*GLUE_TASKS, "QNLI"]


def build_glue(w: World, articles: list[Article], squad_sets: dict, seed: int) -> dict[str, bytes]:
    """{"<Task>/<file>.tsv": bytes} for the eight tasks, each from its own `<seed>:<task>` stream."""
    pools = build_pools(w, articles)
    files = {}
    for task, build in GLUE_TASKS.items():
        files.update(build(w, pools, random.Random(f"{seed}:{task.lower()}")))
    files.update(qnli(squad_sets, random.Random(f"{seed}:qnli")))
    return dict(sorted(files.items()))
