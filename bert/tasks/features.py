"""Task examples as model inputs: `[CLS] first [SEP] second [SEP]` (or the pair template of the
tokenizer in use), as google-research/bert's
run_classifier.py and NVIDIA's run_swag.py build them.

A pair too long for `max_seq_length` loses tokens from the end of its longer text, one at a time
(the shorter is kept whole as long as possible), as their `_truncate_seq_pair` does; a multiple
choice example is one such pair per choice, [N, C, S].
"""

from dataclasses import dataclass

import numpy as np
from tokenizers import Tokenizer
from tqdm import tqdm

from bert.tasks.data import TaskExamples
from bert.text.tokenization import TokenLayout


@dataclass
class TaskFeatures:
    input_ids: np.ndarray  # int32 [N, S], or [N, C, S] for C choices
    token_type_ids: np.ndarray  # int8, the same shape
    attention_mask: np.ndarray  # int8, the same shape
    labels: np.ndarray  # int64 [N] (a class or the right choice) or float32 [N] (a score)
    truncated: int  # sequences that lost tokens to max_seq_length

    def __len__(self) -> int:
        return len(self.labels)

    def model_inputs(self) -> dict[str, np.ndarray]:
        return {
            "input_ids": self.input_ids,
            "token_type_ids": self.token_type_ids,
            "attention_mask": self.attention_mask,
        }

    def training_arrays(self) -> dict[str, np.ndarray]:
        """What the model trains on, by its argument names (bert.training.finetune.FineTuningBatches)."""
        return {**self.model_inputs(), "labels": self.labels}


def make_features(
    examples: TaskExamples,
    tokenizer: Tokenizer,
    max_seq_length: int,
    multiple_choice: bool,
    progress: bool = True,
) -> TaskFeatures:
    """Inputs [N, S], or [N, C, S] when `multiple_choice` (every example then has C second texts)."""
    choices = len(examples.second[0]) if multiple_choice else 1
    shape = (len(examples), choices, max_seq_length)
    input_ids = np.zeros(shape, np.int32)
    token_type_ids = np.zeros(shape, np.int8)
    attention_mask = np.zeros(shape, np.int8)
    layout = TokenLayout.of(tokenizer)
    single_specials = len(layout.single_before) + len(layout.single_after)
    pair_specials = len(layout.pair_before) + len(layout.pair_between) + len(layout.pair_after)
    input_ids[...] = layout.pad

    def pieces(texts: list[str]) -> list[list[int]]:
        return [encoding.ids for encoding in tokenizer.encode_batch(texts, add_special_tokens=False)]

    firsts = pieces(examples.first)
    seconds = pieces([text for second in examples.second for text in second])
    truncated, next_second = 0, 0
    for row in tqdm(range(len(examples)), desc="features", unit="example", disable=not progress):
        for choice in range(choices):
            a = firsts[row]
            if examples.second[row]:
                b = seconds[next_second]
                next_second += 1
                a, b, cut = truncate_pair(a, b, max_seq_length - pair_specials)
                ids, types = layout.pair(a, b)
            else:
                cut = len(a) > max_seq_length - single_specials
                a = a[: max_seq_length - single_specials]
                ids = [*layout.single_before, *a, *layout.single_after]
                types = [0] * len(ids)
            truncated += cut
            input_ids[row, choice, : len(ids)] = ids
            token_type_ids[row, choice, : len(ids)] = types
            attention_mask[row, choice, : len(ids)] = 1
    if not multiple_choice:
        input_ids, token_type_ids, attention_mask = (
            a[:, 0] for a in (input_ids, token_type_ids, attention_mask)
        )
    return TaskFeatures(input_ids, token_type_ids, attention_mask, examples.labels, truncated)


def truncate_pair(a: list[int], b: list[int], budget: int) -> tuple[list[int], list[int], bool]:
    """Cut tokens from the end of the longer of a and b (b on a tie) until both fit in `budget`."""
    cut = len(a) + len(b) > budget
    while len(a) + len(b) > budget:
        if len(a) > len(b):
            a = a[:-1]
        else:
            b = b[:-1]
    return a, b, cut
