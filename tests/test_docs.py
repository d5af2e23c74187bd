"""README.md and docs/*.md: every relative link resolves (file and #anchor), and the README stays short."""

import re
import unicodedata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README_MAX_LINES = 250
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
INLINE_CODE = re.compile(r"`[^`]*`")
# [text](target) or ![alt](target); the target ends at whitespace (an optional "title" follows) or ')'.
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")  # https:, mailto:, ...


def prose_lines(path: Path):
    """(line number, text) of the lines outside fenced code blocks."""
    in_fence = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if not in_fence:
            yield number, line


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: markup dropped, lower-cased, punctuation removed
    (letters, digits, '_' and '-' stay), each space a '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link counts by its text
    text = text.replace("`", "").replace("*", "")
    text = "".join(char for char in text.lower() if char in " -_" or unicodedata.category(char)[0] in "LN")
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor; a repeated heading gets -1, -2, ... as on GitHub."""
    seen: dict[str, int] = {}
    found = set()
    for _, line in prose_lines(path):
        match = HEADING.match(line)
        if not match:
            continue
        slug = github_slug(match.group(2))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def relative_links(path: Path):
    """(line number, target) of every link to a file of this repository."""
    for number, line in prose_lines(path):
        for match in LINK.finditer(INLINE_CODE.sub("", line)):
            target = match.group(1)
            if not EXTERNAL.match(target):
                yield number, target


def broken_links(path: Path) -> list[str]:
    problems = []
    for number, target in relative_links(path):
        file_part, _, anchor = target.partition("#")
        destination = (path.parent / file_part).resolve() if file_part else path
        where = f"{path.relative_to(REPO)}:{number}: link '{target}'"
        if not destination.exists():
            problems.append(f"{where}: no such file {destination.relative_to(REPO)}")
        elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            problems.append(
                f"{where}: no heading with anchor #{anchor} in {destination.relative_to(REPO)} "
                f"(anchors: {', '.join(sorted(anchors(destination)))})"
            )
    return problems


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda path: str(path.relative_to(REPO)))
def test_relative_links_resolve(path):
    problems = broken_links(path)
    assert not problems, "broken links:\n" + "\n".join(problems)


def test_docs_folder_has_the_topics():
    names = {path.name for path in DOCUMENTS}
    expected = {"pipeline.md", "model.md", "squad.md", "experiments.md", "operations.md"}
    expected |= {"performance.md", "development.md", "README.md"}
    assert expected <= names, f"missing under docs/: {sorted(expected - names)}"


def test_readme_is_short():
    lines = len((REPO / "README.md").read_text(encoding="utf-8").splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; keep it at most {README_MAX_LINES}"


@pytest.mark.parametrize(
    ("heading", "slug"),
    [
        ("Crashes, kills and resume", "crashes-kills-and-resume"),
        ("`shard@<corpus>`", "shardcorpus"),
        ("Remotes: share artifacts and experiments", "remotes-share-artifacts-and-experiments"),
        (
            "Length-binned batches: `pretrain.length_binning: true`",
            "length-binned-batches-pretrainlength_binning-true",
        ),
        ("Déjà vu 2.0", "déjà-vu-20"),
    ],
)
def test_github_slug(heading, slug):
    assert github_slug(heading) == slug
