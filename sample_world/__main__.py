"""`python -m sample_world --out data/sample --seed 0`: write the sample world (about 1 second)."""

import argparse
import logging
from pathlib import Path

import sample_world
from bert.errors import UserError, run_main
from sample_world.generate import generate, write_files
from sample_world.wiki_xml import DUMP_NAME

log = logging.getLogger("sample_world")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m sample_world", description=sample_world.__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--out", type=Path, default=Path("data/sample"), help="output folder (default: data/sample)"
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="world seed; the same seed gives the same bytes (default: 0)"
    )
    args = parser.parse_args(argv)
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UserError(
            f"--out {args.out}: cannot create the folder ({error.strerror}); choose a writable --out"
        ) from None
    files, s = generate(args.seed)
    write_files(args.out, files)
    log.info(
        "wikipedia: %d articles, %.1f MB of XML (%.0f kB bz2)",
        s["articles"],
        s["xml_bytes"] / 1e6,
        len(files[f"wikipedia/{DUMP_NAME}"]) / 1e3,
    )
    log.info("books: %d books, %d lines, %.0f kB of text", s["books"], s["book_lines"], s["book_bytes"] / 1e3)
    for name, n in s["questions"].items():
        log.info("squad %s: %d questions (%d unanswerable)", name, n, s["impossible"][name])
    log.info("swag: %s rows", " / ".join(f"{n} {name}" for name, n in s["swag"].items()))
    log.info("glue: %s rows", ", ".join(f"{rel} {n}" for rel, n in s["glue"].items()))
    log.info("wrote %d files, %.2f MB, to %s", len(files), sum(map(len, files.values())) / 1e6, args.out)


if __name__ == "__main__":
    run_main(main)
