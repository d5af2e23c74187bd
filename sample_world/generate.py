"""The whole sample world in memory as {relative path: bytes}, and writing it into a folder."""

import io
import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from bert.atomic import atomic_file
from sample_world.articles import write_article
from sample_world.books import BOOKS_PARQUET, build_books, planted_duplicates
from sample_world.glue import GLUE_FOLDERS, build_glue
from sample_world.squad import SQUAD_FILES, build_squad
from sample_world.swag import SWAG_FILES, build_swag, swag_csv
from sample_world.wiki_xml import DUMP_NAME, INDEX_NAME, build_dump, multistream
from sample_world.world import build_world


def generate(seed: int) -> tuple[dict[str, bytes], dict]:
    """Everything, in memory: {relative path: bytes} and a summary with counts and the QA facts."""
    world = build_world(seed)
    rng_wiki, rng_books, rng_squad = (random.Random(f"{seed}:{part}") for part in ("wiki", "books", "squad"))
    articles = [write_article(world, e, rng_wiki) for e in world.all()]
    files: dict[str, bytes] = {}
    xml = build_dump(world, articles, rng_wiki)
    files[f"wikipedia/{DUMP_NAME}"], files[f"wikipedia/{INDEX_NAME}"] = multistream(xml)

    books = build_books(world, rng_books)
    # Planted duplicates draw on a stream of their own: the other books are the bytes they were.
    books = sorted(books + planted_duplicates(books, articles, random.Random(f"{seed}:duplicates")))
    # (the Parquet rows follow the .txt files in name order)
    all_lines = []
    for slug, lines in books:
        files[f"books/txt/{slug}.txt"] = ("\n".join(lines) + "\n").encode("utf-8")
        all_lines.extend(lines)
    buffer = io.BytesIO()
    pq.write_table(
        pa.table({"text": pa.array(all_lines, pa.string())}),
        buffer,
        compression="zstd",
        compression_level=9,
        row_group_size=1 << 20,
    )
    files[f"books/parquet/{BOOKS_PARQUET}"] = buffer.getvalue()

    sets, qa_facts = build_squad(world, articles, rng_squad)
    for version, (train_name, dev_name) in SQUAD_FILES.items():
        for split, name in (("train", train_name), ("dev", dev_name)):
            doc = {"version": "1.1" if version == "v1.1" else "v2.0", "data": sets[(version, split)]}
            files[f"squad/{version}/{name}"] = json.dumps(doc).encode("utf-8")

    count = {k: sum(len(p["qas"]) for a in v for p in a["paragraphs"]) for k, v in sets.items()}
    impossible = {
        k: sum(q.get("is_impossible", False) for a in v for p in a["paragraphs"] for q in p["qas"])
        for k, v in sets.items()
    }
    # The fine-tuning sets read the articles and SQuAD sets made above and draw on streams of their
    # own, so adding them changed no byte of the files before them.
    swag = build_swag(world, articles, random.Random(f"{seed}:swag"))
    for split, rows in swag.items():
        files[f"swag/{SWAG_FILES[split]}"] = swag_csv(rows)
    glue = build_glue(world, articles, sets, seed)
    for rel, data in glue.items():
        files[f"glue/{rel}"] = data

    summary = {
        "articles": len(articles),
        "xml_bytes": len(xml),
        "books": len(books),
        "book_lines": len(all_lines),
        "book_bytes": sum(len(files[f"books/txt/{s}.txt"]) for s, _ in books),
        "questions": {f"{v}/{s}": count[(v, s)] for v, s in sets},
        "impossible": {f"{v}/{s}": impossible[(v, s)] for v, s in sets},
        "qa_facts": qa_facts,
        "swag": {SWAG_FILES[split]: len(rows) for split, rows in swag.items()},
        # rows: the lines less the header line, which CoLA's files do not have
        "glue": {rel: data.count(b"\n") - (not rel.startswith("CoLA/")) for rel, data in glue.items()},
    }
    return files, summary


def write_files(out: Path, files: dict[str, bytes]) -> None:
    """Each file complete or absent; stale files of ours from another seed are removed."""
    for rel, data in sorted(files.items()):
        with atomic_file(out / rel) as tmp:
            tmp.write_bytes(data)
    folders = ["wikipedia", "books/txt", "books/parquet", "squad/v1.1", "squad/v2.0", "swag"]
    for folder in folders + [f"glue/{task}" for task in GLUE_FOLDERS]:
        for path in sorted((out / folder).iterdir()):
            if path.is_file() and path.relative_to(out).as_posix() not in files:
                path.unlink()
