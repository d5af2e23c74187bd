"""A SQuAD v1.1 / v2.0 file: the official nested JSON (data[].paragraphs[].qas[]) read into
`SquadExample`s, each answer checked against its context, and the file's version."""

from dataclasses import dataclass, field
from pathlib import Path

from bert import inputs
from bert.errors import UserError


@dataclass(frozen=True)
class Answer:
    text: str
    start: int  # character offset of `text` in the context

    @property
    def end(self) -> int:
        return self.start + len(self.text)


@dataclass
class SquadExample:
    qid: str
    title: str
    question: str
    context: str
    answers: list[Answer]  # empty for v2.0's unanswerable questions
    is_impossible: bool = False
    plausible_answers: list[Answer] = field(default_factory=list)  # v2.0, for unanswerable ones


def read_json(path: str | Path, source: str | Path | None = None) -> dict:
    """A SQuAD file's JSON (bert.inputs.read_json: UTF-8, valid JSON, one line otherwise)."""
    return inputs.read_json(path, source)


def dataset_version(path_or_json: str | Path | dict) -> str:
    """'v1.1' or 'v2.0'. The file's `version` field decides ("1.1", "v2.0"); without one, a file
    whose questions carry `is_impossible` is v2.0."""
    dataset = path_or_json if isinstance(path_or_json, dict) else read_json(path_or_json)
    version = str(dataset.get("version", "")).lstrip("v")
    if version.startswith("2"):
        return "v2.0"
    if version.startswith("1"):
        return "v1.1"
    for article in _list(dataset.get("data")):
        for paragraph in _list(article.get("paragraphs") if isinstance(article, dict) else None):
            qas = _list(paragraph.get("qas") if isinstance(paragraph, dict) else None)
            if any(isinstance(qa, dict) and "is_impossible" in qa for qa in qas):
                return "v2.0"
    return "v1.1"


def _list(value) -> list:
    """`value` if it is a list, else nothing: the version is guessed before the structure is
    checked (examples_from_json), and a wrong type there is its error to report."""
    return value if isinstance(value, list) else []


def load_examples(path: str | Path) -> list[SquadExample]:
    """Every question of a SQuAD JSON file, in file order. Answers are checked against their
    context: the text must be found at `answer_start` (plausible_answers are kept unchecked)."""
    return examples_from_json(read_json(path), source=str(path))


def examples_from_json(dataset: dict, source: str = "<json>") -> list[SquadExample]:
    if not isinstance(dataset, dict) or not isinstance(dataset.get("data"), list):
        raise UserError(f"{source}: not a SQuAD file: no top-level 'data' list")
    labelled_v1 = str(dataset.get("version", "")).lstrip("v").startswith("1")
    examples, seen = [], set()
    for article_index, article in enumerate(dataset["data"]):
        title = article.get("title", "") if isinstance(article, dict) else ""
        paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
        if not isinstance(paragraphs, list):
            raise UserError(f"{source}: data[{article_index}] ({title!r}) has no 'paragraphs' list")
        for paragraph_index, paragraph in enumerate(paragraphs):
            where = f"{source}: data[{article_index}].paragraphs[{paragraph_index}]"
            context = paragraph.get("context") if isinstance(paragraph, dict) else None
            if not isinstance(context, str) or not context.strip():
                raise UserError(f"{where}: missing or empty 'context'")
            if not isinstance(paragraph.get("qas"), list):
                raise UserError(f"{where}: no 'qas' list")
            for qa in paragraph["qas"]:
                qid = qa.get("id") if isinstance(qa, dict) else None
                if not isinstance(qid, str):
                    raise UserError(f"{where}: a question without an 'id'")
                if qid in seen:
                    raise UserError(f"{source}: question id {qid!r} occurs twice")
                seen.add(qid)
                for key in ("question", "answers"):
                    if key not in qa:
                        raise UserError(f"{source}: question {qid}: missing key {key!r}")
                if not isinstance(qa["question"], str) or not qa["question"].strip():
                    raise UserError(f"{source}: question {qid}: 'question' is {qa['question']!r}, not a text")
                for key in ("answers", "plausible_answers"):
                    if not isinstance(qa.get(key, []), list):
                        raise UserError(f"{source}: question {qid}: {key!r} is {qa[key]!r}, not a list")
                is_impossible = qa.get("is_impossible", False)
                if not isinstance(is_impossible, bool):  # "false" would read as true
                    raise UserError(
                        f"{source}: question {qid}: 'is_impossible' is {inputs.shown(is_impossible)}, not true or "
                        "false; write the JSON literal true or false, without quotes"
                    )
                if is_impossible and labelled_v1:
                    raise UserError(
                        f"{source}: question {qid} is unanswerable (is_impossible), a SQuAD v2.0 question, "
                        f'but the file says version {dataset["version"]!r}; set "version": "v2.0" in it'
                    )
                answers = [_answer(a, context, source, qid, check=True) for a in qa["answers"]]
                if not answers and not is_impossible:
                    raise UserError(f"{source}: question {qid}: no answers and not marked is_impossible")
                if answers and is_impossible:  # which label would training learn, and evaluation score?
                    raise UserError(
                        f"{source}: question {qid} is marked is_impossible but has {len(answers)} answer(s); an "
                        "unanswerable question has an empty 'answers' list (its candidates go in "
                        "'plausible_answers'): empty its answers, or set is_impossible to false"
                    )
                plausible = [
                    _answer(a, context, source, qid, check=False) for a in qa.get("plausible_answers", [])
                ]
                examples.append(
                    SquadExample(qid, title, qa["question"], context, answers, is_impossible, plausible)
                )
    if not examples:
        raise UserError(
            f"{source}: has no questions (its 'data' holds no qas); give a SQuAD file with questions"
        )
    return examples


def _answer(answer: dict, context: str, source: str, qid: str, check: bool) -> Answer:
    if not isinstance(answer, dict):
        raise UserError(
            f"{source}: question {qid}: an answer is {answer!r:.60}, not an object with 'text' and 'answer_start'"
        )
    if "text" not in answer or "answer_start" not in answer:
        raise UserError(f"{source}: question {qid}: an answer lacks 'text' or 'answer_start'")
    text, start = answer["text"], answer["answer_start"]
    if not isinstance(text, str) or not isinstance(start, int):
        raise UserError(
            f"{source}: question {qid}: answer 'text' must be a string and 'answer_start' an integer"
        )
    found = context[start : start + len(text)]
    if check and (start < 0 or found != text):
        raise UserError(
            f"{source}: question {qid}: answer {text!r} is not at answer_start {start} of its context "
            f"(the context has {found!r} there)"
        )
    return Answer(text, start)
