"""The files of a download stage's output (data/raw/<corpus>), as every extractor lists them.

The download stage writes copies, never links; a link found there was put in by hand. It is walked
as any local source is (bert.source_tree: no FIFO, no loop, no link out of the folder), but the
fix for a link out of it is not `follow_links`, which applies to the sources params.yaml names:
the file belongs among those sources, and the download stage copies it in.
"""

from pathlib import Path

from bert.errors import UserError
from bert.source_tree import FOLLOW_LINKS_FIX, STRICT, SourceTree, walk_source


def downloaded_files(folder: str | Path) -> SourceTree:
    """`folder` (a download's output, or one file of it) walked by the checked walker; one line naming
    the download stage when it is missing."""
    folder = Path(folder)
    if not folder.exists():
        raise UserError(f"{folder}: not found; run `dvc repro download@{folder.name}` first")
    try:
        return walk_source(str(folder), folder, STRICT)
    except UserError as error:
        if FOLLOW_LINKS_FIX not in str(error):
            raise
        fix = (
            f"or name the file among the corpus's sources (corpora.{folder.name}.sources) and run "
            f"`dvc repro download@{folder.name}`, which copies it here"
        )
        raise type(error)(str(error).replace(FOLLOW_LINKS_FIX, fix)) from None
