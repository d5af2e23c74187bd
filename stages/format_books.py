"""Stage format_books: data/raw/bookcorpus/ (.txt books, .parquet with `text`) -> data/documents/bookcorpus/."""

from bert.corpus.books import format_books
from bert.errors import run_main

INPUT = "data/raw/bookcorpus"
OUTPUT = "data/documents/bookcorpus"


def main() -> None:
    format_books(INPUT, OUTPUT)


if __name__ == "__main__":
    run_main(main)
