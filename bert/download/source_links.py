"""Local sources made visible to DVC: a fixed path that stands for files and folders named elsewhere.

DVC hashes only the paths written in dvc.yaml, and its templating cannot turn a list of sources
from params into `deps` (it interpolates scalars only, and cannot leave out URLs). So each
download stage depends on one fixed path, a *slot*, and `link_sources` makes that slot lead to the
local sources by symbolic links, which DVC follows when it hashes a dependency:

- one local source (a file or a folder): the slot is a link to it, so DVC hashes the file, or the
  folder with everything in it (an edited, added or removed file changes the hash);
- otherwise: the slot is a folder holding `sources.txt` (every source as given, one a line) and a
  link per local file. DVC does not walk into a link to a folder that lies inside a folder, so a
  folder is tracked only as the one source; among several it is an error, not a blind spot.

URLs are recorded in `sources.txt` only: their content is never fetched to compute a hash (DVC
status stays offline), so a URL is tracked by its text and checksum, which are params anyway.
Relative sources get relative links, so a moved or cloned project still resolves them.

A link is made only to a source that passed its walk (bert.source_tree): DVC reads everything a
link leads to, at every `dvc status`, before any stage can run, so one to a FIFO, a device or a
folder holding one would hang it, and one that dangles would stop it. Nothing is linked until every
source of the slot has passed, and the `sources` stage publishes all slots at once or none.
"""

import os
from collections.abc import Sequence
from pathlib import Path

from bert.download.transport import local_path
from bert.errors import UserError
from bert.source_tree import Rules, printable, walk_source

LISTING = "sources.txt"


def link_sources(slot: Path, sources: Sequence[str], name: str, rules: Rules) -> None:
    """Make `slot` (which must not exist) stand for the local ones of `sources`, each walked under
    `rules` first; `name` is the param that lists them (corpora.books.sources), for messages."""
    for source in sources:
        if source.splitlines() != [source]:  # sources.txt, which DVC hashes, has one source a line
            raise UserError(
                f"{name}: {printable(source)} holds a line break; give the file or folder a name without one"
            )
    trees = [None if local_path(source) is None else walk_source(source, local_path(source), rules, name)
             for source in sources]  # fmt: skip
    slot.parent.mkdir(parents=True, exist_ok=True)
    if len(trees) == 1 and trees[0] is not None:
        _link(trees[0].path, slot)
        return
    for tree in trees:
        if tree is not None and tree.is_folder:
            raise UserError(
                f"{name}: {printable(tree.source)} is a folder among {len(sources)} sources; DVC can track a "
                "folder's files only when the folder is the one source: give it alone (e.g. as a source of its "
                "own corpus), or list its files"
            )
    slot.mkdir()
    for index, tree in enumerate(trees):
        if tree is not None:  # the index: two sources may share a file name
            _link(tree.path, slot / f"{index}-{tree.path.name}")
    (slot / LISTING).write_text("".join(f"{source}\n" for source in sources), encoding="utf-8")


def _link(target: Path, link: Path) -> None:
    if target.is_absolute():
        link.symlink_to(target)
    else:  # relative to the project, as the stages read it: make it relative to the link's folder
        link.symlink_to(os.path.relpath(Path.cwd() / target, Path.cwd() / link.parent))
