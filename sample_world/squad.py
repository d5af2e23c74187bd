"""SQuAD v1.1 and v2.0: questions about the facts an article's prose states, answered by their
exact spans. Dev questions are about the held-out entities; dev answers come in threes, as the
official dev sets' do; v2.0 adds unanswerable questions with a plausible (wrong) span."""

import hashlib
import random
import re

from sample_world.articles import Article
from sample_world.world import Entity, World

SQUAD_FILES = {
    "v1.1": ("train-v1.1.json", "dev-v1.1.json"),
    "v2.0": ("train-v2.0.json", "dev-v2.0.json"),
}

V2_ANSWERABLE_SHARE = (
    2 / 3
)  # v2.0 keeps this share of the v1.1 questions, then adds half as many unanswerable

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


def question_templates(e: Entity, relation: str) -> list[str]:
    """The templates of QUESTIONS[relation] that `e` has every field for (QQP pairs two of them)."""
    fields = question_fields(e)
    options = [t for t in QUESTIONS[relation] if all(k in fields for k in re.findall(r"\{(\w+)\}", t))]
    # "the Lantern Prize", "the Treaty of Ærøby", but never "the St. Aldric" or "the Zoë Ångström"
    if e.kind in ("town", "country", "person"):
        return [t.replace("the {name}", "{name}") for t in options]
    return options


def ask(e: Entity, relation: str, rng: random.Random) -> str | None:
    options = question_templates(e, relation)
    return rng.choice(options) if options else None


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
