"""Mixing several corpora into one set of pretraining shards.

- intra: the corpora are merged at document level before instances are made, so an instance's
  random next segment may come from another corpus. Output shard k gets its documents from a few
  input shards of every corpus (never from all of them, so each input is read about once).
- inter: instances are made per corpus (one task per input shard), then shuffled together into
  the output shards: output shard k takes a seeded random contiguous slice of every per-corpus
  file and shuffles those rows. Both segments of an instance come from the same corpus.

`weights` up- or down-sample a corpus by document: weight w keeps each document floor(w) times
plus once more with probability w - floor(w), decided per document from the seed.

Every task is seeded from the run's seed and its own index, so outputs are byte-identical
whatever the number of worker processes.
"""

import hashlib
import json
import shutil
from dataclasses import asdict
from pathlib import Path

import numpy as np

from bert.atomic import atomic_folder
from bert.compute import Compute
from bert.corpus.sentence_shards import iter_documents
from bert.errors import UserError
from bert.parallel import run_tasks
from bert.pretraining.examples import ExampleConfig
from bert.pretraining.hdf5 import copy_instances
from bert.pretraining.instances import ShardStats, write_instances


def _identity(corpus_index: int, file_index: int, row: int) -> int:
    return ((corpus_index << 20 | file_index) << 36) | row


def weighted_batches(
    path, corpus_index: int, file_index: int, weight: float, seed: int, rows=None, counts=None
):
    """(documents, identities) batches of one sentence shard, each document repeated by `weight`;
    `rows` = (stride, offset) keeps only rows with row % stride == offset. Copies are decided per
    document from (seed, corpus, file), the same whichever output shard reads the row."""
    rng = np.random.default_rng([seed, corpus_index, file_index, 7])
    whole, fraction = int(weight), weight - int(weight)
    first_row = 0
    for documents in iter_documents(path):
        row_numbers = np.arange(first_row, first_row + len(documents))
        copies = whole + (rng.random(len(documents)) < fraction)
        first_row += len(documents)
        if rows is not None:
            stride, offset = rows
            copies = np.where(row_numbers % stride == offset, copies, 0)
        kept = [
            (document, _identity(corpus_index, file_index, int(row)))
            for document, row, count in zip(documents, row_numbers, copies)
            for _ in range(count)
        ]
        if counts is not None:
            counts[corpus_index] = counts.get(corpus_index, 0) + len(kept)
        if kept:
            yield [document for document, _ in kept], [identity for _, identity in kept]


def intra_plan(num_files: int, num_parts: int, part: int) -> list[tuple[int, int, int]]:
    """Which (file index, row stride, row offset) of a corpus's shards output shard `part` reads.
    With at least as many files as parts, whole files go round-robin; otherwise the parts that
    share a file split its rows."""
    if num_files >= num_parts:
        return [(file, 1, 0) for file in range(part, num_files, num_parts)]
    file = part % num_files
    sharing = len(range(file, num_parts, num_files))
    return [(file, sharing, part // num_files)]


def _intra_task(part, num_parts, shards, weights, output, vocab, lower_case, config, seed):
    counts: dict[int, int] = {}

    def batches():
        for corpus_index, (corpus, files) in enumerate(shards.items()):
            for file_index, stride, offset in intra_plan(len(files), num_parts, part):
                yield from weighted_batches(
                    files[file_index],
                    corpus_index,
                    file_index,
                    weights.get(corpus, 1.0),
                    seed,
                    (stride, offset),
                    counts,
                )

    stats = write_instances(batches(), output, vocab, lower_case, config, (seed, part))
    names = list(shards)
    stats.per_input = {names[index]: count for index, count in sorted(counts.items())}
    return stats


def _corpus_task(corpus_index, file_index, path, weight, output, vocab, lower_case, config, seed):
    batches = weighted_batches(path, corpus_index, file_index, weight, seed)
    return write_instances(batches, output, vocab, lower_case, config, (seed, corpus_index, file_index))


def _mix_task(part, sources, output, seed):
    return copy_instances(sources, output, permutation_seed=[seed, part, 11])


def inter_slices(num_rows: int, num_parts: int, part: int, rotation: int) -> list[tuple[int, int]]:
    """Row ranges of a file of num_rows that output shard `part` takes: the part-th of num_parts
    equal slices of the rows rotated by `rotation` (at most two contiguous ranges)."""
    begin = part * num_rows // num_parts + rotation
    end = (part + 1) * num_rows // num_parts + rotation
    ranges = [(begin, min(end, num_rows)), (max(begin, num_rows) - num_rows, end - num_rows)]
    return [(start, stop) for start, stop in ranges if stop > start]


def create_examples(
    shards: dict[str, list[Path]],
    output_dir: str | Path,
    vocab: str | Path,
    lower_case: bool,
    config: ExampleConfig,
    mode: str,
    weights: dict[str, float],
    num_output_shards: int,
    seed: int,
    compute: Compute | int,
) -> dict:
    """Write output_dir/part_NNNNN.hdf5 (num_output_shards of them) and output_dir/manifest.json.
    Written into a temporary folder beside output_dir and renamed into place at the end
    (bert.atomic.atomic_folder): a failed, killed or disk-full run leaves the previous output."""
    if mode not in ("intra", "inter"):
        raise UserError(f"mixing mode {mode!r}: allowed: intra, inter")
    vocab = str(vocab)
    with atomic_folder(output_dir) as building:
        parts = [building / f"part_{index:05d}.hdf5" for index in range(num_output_shards)]
        made = _mixed_within_instances if mode == "intra" else _mixed_across_instances
        total, corpus_stats, part_sizes = made(
            shards, parts, vocab, lower_case, config, weights, seed, compute, output_dir
        )
        if total.instances == 0:
            raise UserError("no pretraining instances: the train shards hold no documents with text")
        manifest = _manifest(total, corpus_stats, parts, part_sizes, vocab, lower_case, config, mode,
                             weights, seed)  # fmt: skip
        with open(building / "manifest.json", "w", encoding="utf-8") as file:
            json.dump(manifest, file, indent=2, sort_keys=True)
            file.write("\n")
    return manifest


def _mixed_within_instances(shards, parts, vocab, lower_case, config, weights, seed, compute, output_dir):
    """intra: each output shard's instances are made from documents of every corpus (one task per
    output shard). Returns the totals, per-corpus documents and each shard's (instances, tokens)."""
    corpus_stats: dict[str, dict] = {name: {"documents": 0} for name in shards}
    total, part_sizes = ShardStats(), []
    tasks = [
        (k, len(parts), shards, weights, str(parts[k]), vocab, lower_case, config, seed)
        for k in range(len(parts))
    ]
    results = run_tasks(
        _intra_task,
        tasks,
        compute,
        "examples (intra)",
        describe=lambda task: f"{output_dir}/{parts[task[0]].name}",
    )
    for stats in results:
        part_sizes.append((stats.instances, stats.tokens))
        total.add(stats)
        for corpus, documents in stats.per_input.items():
            corpus_stats[corpus]["documents"] += documents
    return total, corpus_stats, part_sizes  # no instances per corpus: an intra instance may mix corpora


def _mixed_across_instances(shards, parts, vocab, lower_case, config, weights, seed, compute, output_dir):
    """inter: instances are made per corpus file (each pair from one corpus), then every output
    shard takes a rotated slice of each file's instances. Returns as _mixed_within_instances, with
    instances per corpus."""
    corpus_stats: dict[str, dict] = {name: {"documents": 0, "instances": 0} for name in shards}
    total = ShardStats()
    scratch = parts[0].parent / "per_corpus"
    scratch.mkdir()
    tasks, names = [], []
    for corpus_index, (corpus, files) in enumerate(shards.items()):
        for file_index, path in enumerate(files):
            per_corpus = scratch / f"{corpus}_{file_index:05d}.hdf5"
            weight = weights.get(corpus, 1.0)
            tasks.append(
                (
                    corpus_index,
                    file_index,
                    str(path),
                    weight,
                    str(per_corpus),
                    vocab,
                    lower_case,
                    config,
                    seed,
                )
            )
            names.append(corpus)
    files_made = []
    results = run_tasks(_corpus_task, tasks, compute, "examples (per corpus)", describe=lambda task: task[2])
    for task, corpus, stats in zip(tasks, names, results):
        total.add(stats)
        corpus_stats[corpus]["documents"] += stats.documents
        corpus_stats[corpus]["instances"] += stats.instances
        files_made.append((task[4], stats.instances))
    rotations = [
        int(np.random.default_rng([seed, index, 13]).integers(0, max(rows, 1)))
        for index, (_, rows) in enumerate(files_made)
    ]
    mix_tasks = []
    for part in range(len(parts)):
        sources = [
            (path, start, stop)
            for (path, rows), rotation in zip(files_made, rotations)
            for start, stop in inter_slices(rows, len(parts), part, rotation)
        ]
        mix_tasks.append((part, sources, str(parts[part]), seed))
    # an output shard with no rows at all (tiny inputs) still gets an empty, valid file
    for _, sources, path, _ in mix_tasks:
        if not sources:
            copy_instances([(files_made[0][0], 0, 0)], path)
    mixed = iter(
        run_tasks(
            _mix_task,
            [task for task in mix_tasks if task[1]],
            compute,
            "mixing (inter)",
            describe=lambda task: f"{output_dir}/{Path(task[2]).name}",
        )
    )
    part_sizes = [next(mixed) if sources else (0, 0) for _, sources, _, _ in mix_tasks]
    shutil.rmtree(scratch)
    return total, corpus_stats, part_sizes


def _manifest_settings(config: ExampleConfig) -> dict:
    """The example settings as manifests have always named them, so that the demo's keep their
    bytes: masking as the flag `dynamic_masking` in its place, next_sentence only when off."""
    named = {}
    for key, value in asdict(config).items():
        if key == "masking":
            named["dynamic_masking"] = value == "dynamic"
        elif key != "next_sentence" or not value:
            named[key] = value
    return named


def _manifest(total, corpus_stats, parts, part_sizes, vocab, lower_case, config, mode, weights, seed) -> dict:
    """What the examples are and were made from: counts, the vocabulary's hash, every param."""
    return {
        "instances": total.instances,
        "tokens": total.tokens,
        "documents": total.documents,
        "sentences": total.sentences,
        "text_bytes": total.text_bytes,
        "random_next_fraction": round(total.random_next / total.instances, 4),
        "vocab_sha256": hashlib.sha256(Path(vocab).read_bytes()).hexdigest(),
        "params": {
            **_manifest_settings(config),
            "lower_case": lower_case,
            "mode": mode,
            "weights": weights,
            "num_output_shards": len(parts),
            "seed": seed,
        },
        "corpora": corpus_stats,
        "shards": [
            {"file": path.name, "instances": instances, "tokens": tokens}
            for path, (instances, tokens) in zip(parts, part_sizes)
        ],
    }
