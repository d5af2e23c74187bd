"""Stage eval_texts: the evaluation texts this DAG scores on -> data/decontaminate/remove/.

SQuAD's dev contexts and questions (data/squad/dev.json, when squad.run names a version) and every
dev split of each task in `tasks.run` (its texts: sentences, questions, SWAG's contexts and endings), one Parquet table of
(set, text) for decontamination: the contamination report reads it, and so does the clean stage
under `clean.decontaminate: remove` (then, and only then, pretraining depends on it).
"""

from bert.cleaning.contamination import write_eval_texts
from bert.errors import run_main
from bert.squad.dataset import load_examples
from bert.tasks.catalogue import task_named
from bert.tasks.data import read_split
from stages.common import layout
from stages.common.params import load_params


def main() -> None:
    params = load_params()
    texts: dict[str, list[str]] = {}
    if params.squad.run:  # else data/squad holds its README alone, or files of an earlier run
        contexts = {}
        questions = []
        for example in load_examples(layout.SQUAD_DEV):
            contexts.setdefault(example.context, None)
            questions.append(example.question)
        texts["squad"] = [*contexts, *questions]
    for name in params.tasks.run:
        task = task_named(name)
        for split in task.dev_splits:
            examples = read_split(task, layout.task_data(name) / task.splits[split])
            label = name if split == "dev" else f"{name}_{split.removeprefix('dev_')}"
            texts[label] = [*examples.first, *(text for second in examples.second for text in second)]
    write_eval_texts(layout.EVAL_TEXTS, texts)


if __name__ == "__main__":
    run_main(main)
