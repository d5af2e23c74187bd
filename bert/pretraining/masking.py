"""Masked-LM masking (Google's / NVIDIA's `create_masked_lm_predictions`), vectorised over a batch.

Per sequence: pick num_to_predict = min(max_predictions, max(1, round(length * masked_lm_prob)))
positions (length counts [CLS] and [SEP], as Google does) uniformly among the maskable ones; with
whole-word masking pick whole words in random order, skipping a word that would overshoot, as
Google does. Each picked position becomes [MASK] 80% of the time, a random token 10% (of the whole
vocabulary for WordPiece, as Google; of the non-special ids for other tokenizers), and stays itself
10%. The same function serves static masking (example creation)
and dynamic masking (the pretraining data loader, each epoch).
"""

import numpy as np


def mask_batch(
    input_ids: np.ndarray,
    candidate: np.ndarray,
    word_start: np.ndarray | None,
    masked_lm_prob: float,
    max_predictions: int,
    replaceable: np.ndarray,
    mask_id: int,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mask a batch of sequences.

    input_ids [N, S] int: token ids, padded. candidate [N, S] bool: maskable positions (real tokens
    that are not [CLS]/[SEP]/[PAD]). word_start [N, S] bool or None: for whole-word masking, True at
    the first piece of each word; a False candidate joins the word of the candidate before it.
    Returns (masked_input_ids [N, S], masked_lm_positions [N, P] int32, masked_lm_ids [N, P] int32)
    with P = max_predictions, positions ascending, unused slots 0. replaceable: int [K], the ids a
    position replaced at random is drawn from, uniformly (TokenLayout.replaceable_ids).
    """
    input_ids = np.asarray(input_ids)
    candidate = np.asarray(candidate, dtype=bool)
    num_rows, seq_len = input_ids.shape
    num_candidates = candidate.sum(axis=1)
    # Google counts every token of the pair, [CLS] and both [SEP] included: candidates + 3.
    num_to_predict = np.minimum(
        max_predictions, np.maximum(1, np.round((num_candidates + 3) * masked_lm_prob))
    )
    num_to_predict = np.minimum(num_to_predict, num_candidates).astype(np.int64)
    used = np.arange(max_predictions)[None, :] < num_to_predict[:, None]  # [N, P]

    positions = np.zeros((num_rows, max_predictions), dtype=np.int64)
    if word_start is None:
        # which candidates (the k-th of its row), then where they are: [N, P] work, not [N, S]
        ranks = _choose_ranks(num_candidates, num_to_predict, max_predictions, rng)
        candidate_flat = np.flatnonzero(candidate)  # row-major: each row's candidates, ascending
        row_first = np.cumsum(num_candidates) - num_candidates
        positions[used] = candidate_flat[(row_first[:, None] + ranks)[used]] % seq_len
    else:
        chosen = _choose_words(candidate, np.asarray(word_start, dtype=bool), num_to_predict, rng)
        # whole words may fill fewer than num_to_predict slots
        used = np.arange(max_predictions)[None, :] < chosen.sum(axis=1)[:, None]
        positions[used] = np.nonzero(chosen)[1]  # row-major: ascending within a row

    rows = np.nonzero(used)[0]
    cols = positions[used]
    original = input_ids[rows, cols]
    action = rng.random(rows.size)
    replacement = np.where(action < 0.8, mask_id, original)
    random_token = action >= 0.9
    replacement[random_token] = replaceable[rng.integers(0, len(replaceable), size=int(random_token.sum()))]
    masked = input_ids.copy()
    masked[rows, cols] = replacement
    labels = np.zeros((num_rows, max_predictions), dtype=np.int32)
    labels[used] = original
    return masked, positions.astype(np.int32), labels


def _choose_ranks(num_candidates, num_to_predict, max_predictions, rng) -> np.ndarray:
    """int64 [N, P]: per row, num_to_predict distinct ranks in [0, num_candidates), ascending
    (a uniform random subset, as Google's shuffle-then-take), then unused slots.

    Robert Floyd's sampling algorithm, one step for all rows at once: at step s the row draws t in
    [0, j] with j = n - k + s, and takes t, or j if t is already taken."""
    num_rows = len(num_candidates)
    # step-major [P, N]: each step works on contiguous rows of all sequences
    taken = np.full((max_predictions, num_rows), -1, dtype=np.int64)
    draws = rng.random((max_predictions, num_rows))
    for step in range(int(num_to_predict.max(initial=0))):
        j = num_candidates - num_to_predict + step
        t = (draws[step] * (j + 1)).astype(np.int64)
        already = (taken[:step] == t).any(axis=0)
        taken[step] = np.where(step < num_to_predict, np.where(already, j, t), -1)
    taken[taken < 0] = num_candidates.max(initial=0)  # unused slots sort last
    return np.sort(taken.T, axis=1)


def _choose_words(candidate, word_start, num_to_predict, rng) -> np.ndarray:
    """Whole words in random order, each taken if it still fits in num_to_predict (Google's rule)."""
    num_rows, seq_len = candidate.shape
    previous_candidate = np.zeros_like(candidate)
    previous_candidate[:, 1:] = candidate[:, :-1]
    starts = candidate & (word_start | ~previous_candidate)
    # word number of every position (-1 outside candidates); words are runs that begin at a start
    word_of = np.cumsum(starts, axis=1) - 1
    word_of[~candidate] = -1
    num_words = starts.sum(axis=1)
    max_words = int(num_words.max(initial=0))
    column = np.where(word_of < 0, max_words, word_of)  # column max_words collects non-candidates
    flat = (np.arange(num_rows)[:, None] * (max_words + 1) + column).ravel()
    sizes = np.bincount(flat, minlength=num_rows * (max_words + 1)).reshape(num_rows, max_words + 1)
    sizes = sizes[:, :max_words]
    keys = rng.random((num_rows, max_words))
    keys[np.arange(max_words)[None, :] >= num_words[:, None]] = 2.0
    order = np.argsort(keys, axis=1, kind="stable")
    taken_words = np.zeros((num_rows, max_words), dtype=bool)
    count = np.zeros(num_rows, dtype=np.int64)
    all_rows = np.arange(num_rows)
    for step in range(max_words):
        active = (count < num_to_predict) & (step < num_words)
        if not active.any():
            break
        word = order[:, step]
        size = sizes[all_rows, word]
        fits = active & (count + size <= num_to_predict)
        taken_words[all_rows[fits], word[fits]] = True
        count += np.where(fits, size, 0)
    padded = np.concatenate([taken_words, np.zeros((num_rows, 1), dtype=bool)], axis=1)
    return np.take_along_axis(padded, column, axis=1)
