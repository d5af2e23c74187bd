"""Stage format_books: data/raw/bookcorpus/ (.txt books, .parquet with `text`) -> data/documents/bookcorpus/."""

from bert.corpus.books import format_books
from stages import run_stage

INPUT = "data/raw/bookcorpus"
OUTPUT = "data/documents/bookcorpus"


def main() -> None:
    format_books(INPUT, OUTPUT)


if __name__ == "__main__":
    run_stage(main)
