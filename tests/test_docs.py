"""README.md and docs/*.md: every relative link resolves (file and #anchor), every docs page and
anchor the code, params.yaml and the docs name exists, every page is linked, and the README stays short."""

import re
import unicodedata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README_MAX_LINES = 250
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# docs/pipeline.md is the overview of the data stages; each topic has a page of its own, which the
# overview's table links.
DATA_STAGE_PAGES = (
    "corpora.md", "downloads.md", "documents.md", "cleaning.md", "sharding.md", "vocabulary.md",
    "examples.md", "phases.md", "domain-adaptation.md", "scale-out.md", "sample-world.md",
)  # fmt: skip

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
    expected |= {"performance.md", "development.md", "README.md", "training.md", "tasks.md"}
    expected |= set(DATA_STAGE_PAGES)
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


# Params named in the docs: a dotted name in inline code whose first part is a top-level key of
# params.yaml (`pretrain.phase1.max_steps`, `corpora.<corpus>.sources`, `-S squad.recipe.epochs=2`).
PARAMS_FILE = REPO / "params.yaml"
DOTTED = re.compile(r"(?<![\w./<-])([a-z_][a-z0-9_]*(?:\.[A-Za-z0-9_<>|*-]+)+)")
FILE_SUFFIXES = {"py", "md", "json", "yaml", "txt", "tsv", "csv", "log", "safetensors", "bin", "pt", "h5"}
# Inline code that looks like a param but is something else, with what it is.
NOT_PARAMS = {"distributed.scheduler.allowed-failures": "a Dask configuration key"}
# Where the docs write a choice of keys in one name: phase1|phase2, phase1|2, phase*, <phase>.
ALTERNATIVES = re.compile(r"\|")


def params_tree() -> dict:
    import yaml

    return yaml.safe_load(PARAMS_FILE.read_text(encoding="utf-8"))


def named_params() -> dict[str, list[str]]:
    """Every dotted param name in README.md and docs/, with where it is written."""
    top = set(params_tree())
    found: dict[str, list[str]] = {}
    for path in DOCUMENTS:
        for number, line in prose_lines(path):
            for span in re.findall(r"`([^`]+)`", line.replace("\\|", "|")):  # \| in a table cell
                for match in DOTTED.finditer(" ".join(brace_expansion(span))):
                    name = match.group(1).rstrip(".")
                    parts = name.split(".")
                    if parts[0] not in top or parts[-1] in FILE_SUFFIXES or name in NOT_PARAMS:
                        continue
                    found.setdefault(name, []).append(f"{path.relative_to(REPO)}:{number}")
    return found


def brace_expansion(text: str) -> list[str]:
    """`examples.{dupe_factor,whole_word_mask}` as the names it stands for, as a shell expands it."""
    match = re.search(r"\{([^{}]*,[^{}]*)\}", text)
    if not match:
        return [text]
    return [
        expanded
        for choice in match.group(1).split(",")
        for expanded in brace_expansion(text[: match.start()] + choice.strip() + text[match.end() :])
    ]


def _resolves(node, parts: list[str], recipe_keys: set[str]) -> bool:
    """Whether the dotted parts lead somewhere in the params tree. A part in <angle brackets> or
    `*` stands for any key of its level; `a|b` and `phase1|2` for each alternative; under a
    `recipe` that is empty in params.yaml (a task's changes), any key of finetune.recipe."""
    if not parts:
        return True
    part, rest = parts[0], parts[1:]
    if not isinstance(node, dict):
        return False
    if part == "*" or (part.startswith("<") and part.endswith(">")):  # some entry has the rest
        return any(_resolves(child, rest, recipe_keys) for child in node.values())
    if "|" in part:
        first, *others = part.split("|")
        prefix = first.rstrip("0123456789")
        options = [first, *(other if other in node else prefix + other for other in others)]
        return all(_resolves(node, [option, *rest], recipe_keys) for option in options)
    if part.endswith("*"):
        matching = [key for key in node if str(key).startswith(part[:-1])]
        return bool(matching) and all(_resolves(node[key], rest, recipe_keys) for key in matching)
    if part not in node:
        return False
    child = node[part]
    if part == "recipe" and child == {}:
        return len(rest) <= 1 and (not rest or rest[0] in recipe_keys)
    return _resolves(child, rest, recipe_keys)


def test_every_param_the_docs_name_exists():
    tree = params_tree()
    recipe_keys = set(tree["finetune"]["recipe"])
    unknown = [
        f"{', '.join(places)}: `{name}` is not a key of params.yaml"
        for name, places in sorted(named_params().items())
        if not _resolves(tree, name.split("."), recipe_keys)
    ]
    assert not unknown, "docs name params that do not exist:\n" + "\n".join(unknown)


def leaf_params(node, prefix: str = "") -> list[str]:
    """params.yaml's leaves as dotted names. The entries of USER_NAMED's groups are the user's own
    names (or versions), so each of their keys counts once, as `corpora.<corpus>.kind`."""
    leaves = []
    for key, child in node.items():
        group = prefix.rstrip(".")
        name = f"{prefix}<{USER_NAMED[group]}>" if group in USER_NAMED and key != "run" else f"{prefix}{key}"
        if isinstance(child, dict) and child:
            leaves.extend(leaf_params(child, f"{name}."))
        else:
            leaves.append(name)
    return sorted(set(leaves))


USER_NAMED = {
    "corpora": "corpus",
    "tasks": "task",
    "tasks.run": "task",
    "weights": "name",
    "mixing.weights": "corpus",
    "squad.sources": "version",
}


def test_every_param_is_named_in_some_doc():
    """Each param of params.yaml appears in README.md or docs/ (by its dotted name, written out or
    with the docs' shorthands), so a new param cannot land undocumented."""
    tree = params_tree()
    recipe_keys = set(tree["finetune"]["recipe"])
    documented = named_params()
    missing = []
    for leaf in leaf_params(tree):
        parts = leaf.split(".")
        if "." not in leaf:  # a top-level scalar (seed): its name alone is its dotted name
            text = "\n".join(path.read_text(encoding="utf-8") for path in DOCUMENTS)
            if f"`{leaf}`" not in text:
                missing.append(leaf)
            continue
        if not any(_covers(name.split("."), parts, tree, recipe_keys) for name in documented):
            missing.append(leaf)
    assert not missing, "params no doc names (say what each does in docs/):\n" + "\n".join(missing)


def _covers(named: list[str], leaf: list[str], tree: dict, recipe_keys: set[str]) -> bool:
    """Whether a name the docs write (possibly with <placeholders>, `*` or `a|b`) stands for the leaf."""
    if len(named) != len(leaf):
        return False
    for written, actual in zip(named, leaf):
        if written == actual or written == "*" or (written.startswith("<") and written.endswith(">")):
            continue
        if (
            actual.startswith("<")
            and actual.endswith(">")
            and _resolves(tree, [*named[: named.index(written)], written], recipe_keys)
        ):
            continue
        if "|" in written:
            first, *others = written.split("|")
            prefix = first.rstrip("0123456789")
            if actual in {first, *others, *(prefix + other for other in others)}:
                continue
        if written.endswith("*") and actual.startswith(written[:-1]):
            continue
        return False
    return True


# The library's map: README's layout and docs/development.md's table name every module of bert/
# and nothing that is not there, so neither can go stale.
LIBRARY = REPO / "bert"


def library_modules() -> set[str]:
    """bert's modules as paths below bert/ (`corpus/shards.py`), package markers left out."""
    return {
        str(path.relative_to(LIBRARY))
        for path in LIBRARY.rglob("*.py")
        if path.name not in {"__init__.py", "__main__.py"}
    }


def map_rows() -> list[tuple[str, list[str]]]:
    """(layer, modules) of development.md's map: in the modules cell, `pkg/` opens a package and
    each bare `name` that follows is bert/pkg/name.py (bert/name.py before any package)."""
    text = (REPO / "docs" / "development.md").read_text(encoding="utf-8")
    section = text[text.index("### The map") :]
    section = section[: section.index("\n## ")]
    rows = []
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.replace("\\|", "/").strip("|").split("|")]
        if len(cells) < 2 or cells[0] in {"layer", ""} or set(cells[0]) <= {"-", " "}:
            continue
        package, modules = "", []
        for name in re.findall(r"`([^`]+)`", cells[1]):
            if name.endswith("/"):
                package = name
            else:
                modules.append(f"{package}{name}.py")
        rows.append((cells[0], modules))
    return rows


def test_the_development_map_names_every_module_and_only_those():
    named = [module for _, modules in map_rows() for module in modules]
    existing = library_modules()
    assert not set(named) - existing, (
        f"development.md's map names modules bert/ lacks: {sorted(set(named) - existing)}"
    )
    assert not existing - set(named), (
        f"modules of bert/ missing from development.md's map: {sorted(existing - set(named))}"
    )


def readme_layout_lines() -> list[str]:
    """The indented lines below `bert/` in README's layout block, one per module group or package."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = text[text.index("## Layout") :]
    block = block[block.index("```") + 3 :]
    lines = block[: block.index("```")].splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("bert/"))
    following = lines[first + 1 :]
    return following[: next((i for i, line in enumerate(following) if not line.startswith("  ")), None)]


def readme_layout_entries() -> set[str]:
    """The bert/ entries of README's layout block: `name.py` and `package/` tokens of its indented lines."""
    entries = set()
    for line in readme_layout_lines():
        for token in line.split():
            if not (token.endswith(".py") or token.endswith("/")):
                break
            entries.add(token)
    return entries


def test_readme_layout_matches_the_library():
    entries = readme_layout_entries()
    top_level = {path.name + ("/" if path.is_dir() else "") for path in LIBRARY.iterdir()}
    top_level = {
        name for name in top_level if name.endswith((".py", "/")) and not name.startswith(("__", "."))
    }
    assert not entries - top_level, f"README's layout names what bert/ lacks: {sorted(entries - top_level)}"
    assert not top_level - entries, f"README's layout leaves out: {sorted(top_level - entries)}"


def test_readme_layout_names_each_module_of_each_package():
    """A package's line in README's layout names every module in it (`corpus/  mediawiki, ...`)."""
    missing = []
    for line in readme_layout_lines():
        package, _, description = line.strip().partition(" ")
        if not package.endswith("/"):
            continue
        for module in sorted((LIBRARY / package).glob("*.py")):
            if module.stem not in {"__init__", "__main__"} and not re.search(
                rf"\b{module.stem}\b", description
            ):
                missing.append(f"bert/{package}{module.name}")
    assert not missing, f"README's layout does not name these modules on their package's line: {missing}"


def test_each_module_imports_only_its_layer_and_those_below_and_nothing_imports_itself():
    """The map's rows are the library's layers, bottom up: every import of bert/ (also inside a
    function) goes to the module's own row or a lower one, and no chain of imports comes back to
    where it started (a circle hidden behind a function-level import is still a circle)."""
    from scripts.stage_deps import imported_modules

    layer_of = {
        "bert." + module.removesuffix(".py").replace("/", "."): row
        for row, (_, modules) in enumerate(map_rows())
        for module in modules
    }
    imports = {
        name: {other for other in imported_modules(REPO / "bert" / path) if other in layer_of}
        for path, name in ((p, "bert." + p.removesuffix(".py").replace("/", ".")) for p in library_modules())
    }
    rows = [row for row, _ in map_rows()]
    upward = [
        f"{name} ({rows[layer_of[name]]}) imports {other} ({rows[layer_of[other]]})"
        for name, others in sorted(imports.items())
        for other in sorted(others)
        if layer_of[other] > layer_of[name]
    ]
    assert not upward, "imports that go up the map's layers:\n" + "\n".join(upward)

    def circle_from(start: str) -> list[str] | None:
        path, seen = [start], set()

        def walk(name: str) -> list[str] | None:
            for other in sorted(imports[name]):
                if other == start:
                    return [*path, start]
                if other not in seen:
                    seen.add(other)
                    path.append(other)
                    found = walk(other)
                    if found:
                        return found
                    path.pop()
            return None

        return walk(start)

    circles = [" -> ".join(found) for name in sorted(imports) if (found := circle_from(name))]
    assert not circles, "modules that import themselves through others:\n" + "\n".join(circles)


# Mentions of a docs page outside link syntax: `docs/<page>.md#<anchor>` in code, comments, error
# messages, params.yaml and dvc.yaml, and `<page>.md#<anchor>` in the docs' own prose and examples.
# Each must name a page that exists and, with an anchor, one of its headings.
MENTION = re.compile(r"(?<![\w/.-])(docs/)?([\w-]+\.md)(?:#([\w-]+))?")
MENTION_ROOTS = ("bert", "stages", "scripts", "tests", "bench", "sample_world")
MENTION_FILES = ("params.yaml", "dvc.yaml", "Makefile", "Dockerfile", "pyproject.toml", ".ci/run")
MENTION_SUFFIXES = {".py", ".sh", ".sbatch", ".txt", ".md", ".yaml", ".toml"}


def files_that_mention_docs() -> list[Path]:
    """The project's own text files: code, scripts, configuration, docs, and the READMEs committed
    among data/'s folders (a few levels down, so a run's outputs are never walked)."""
    found = [REPO / name for name in MENTION_FILES if (REPO / name).exists()]
    found += sorted(REPO.glob("requirements*.txt")) + DOCUMENTS
    for root in MENTION_ROOTS:
        found += sorted(path for path in (REPO / root).rglob("*") if path.suffix in MENTION_SUFFIXES)
    for depth in range(1, 4):
        found += sorted((REPO / "data").glob("*/" * depth + "README.*"))
    return [path for path in found if path.is_file() and "__pycache__" not in path.parts]


def docs_mentions(path: Path):
    """(line number, page, anchor) of each docs page `path` names: `docs/<page>.md` anywhere, and
    in docs/ also a bare `<page>.md#<anchor>` (a page beside it)."""
    in_docs = path.parent == REPO / "docs"
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        for match in MENTION.finditer(line):
            prefix, page, anchor = match.groups()
            if prefix or (in_docs and anchor):
                yield number, page, anchor


def test_every_docs_page_and_anchor_mentioned_in_the_repository_exists():
    problems = []
    for path in files_that_mention_docs():
        for number, page, anchor in docs_mentions(path):
            destination = REPO / "docs" / page
            where = f"{path.relative_to(REPO)}:{number}: docs/{page}{'#' + anchor if anchor else ''}"
            if not destination.exists():
                problems.append(f"{where}: no such page")
            elif anchor and anchor not in anchors(destination):
                problems.append(f"{where}: no heading with that anchor in docs/{page}")
    assert not problems, "mentions of docs pages that lead nowhere:\n" + "\n".join(problems)


def test_the_readme_and_the_pipeline_overview_link_their_pages():
    """Every page under docs/ is linked from the README, and every data-stage page from the
    overview in docs/pipeline.md, so no page is out of reach."""
    readme = {target.partition("#")[0] for _, target in relative_links(REPO / "README.md")}
    unlinked = sorted(path.name for path in DOCUMENTS[1:] if f"docs/{path.name}" not in readme)
    assert not unlinked, f"docs pages the README does not link: {unlinked}"
    overview = {target.partition("#")[0] for _, target in relative_links(REPO / "docs" / "pipeline.md")}
    assert not set(DATA_STAGE_PAGES) - overview, (
        f"data-stage pages docs/pipeline.md does not link: {sorted(set(DATA_STAGE_PAGES) - overview)}"
    )


# The tests' layout: a folder of tests per package of bert/, development.md's table of test files
# names every test file and nothing else, and every tests/ path the docs and scripts name is there,
# so a moved test file leaves no stale name behind.
TESTS = REPO / "tests"
TEST_PATH = re.compile(r"\btests/[\w/]+\.py\b")


def suite_files() -> set[str]:
    """The test files as paths below tests/ (`corpus/test_shards.py`)."""
    return {str(path.relative_to(TESTS)) for path in TESTS.rglob("test_*.py")}


def table_of_test_files() -> list[str]:
    """The files named in the first cells of development.md's table of test files."""
    text = (REPO / "docs" / "development.md").read_text(encoding="utf-8")
    section = text[text.index("## Tests") :]
    section = section[: section.index("\n## ", 1)]
    first_cells = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    return [name for cell in first_cells for name in re.findall(r"`([^`]+\.py)`", cell)]


def test_each_package_of_the_library_has_its_folder_of_tests():
    packages = {path.parent.name for path in LIBRARY.glob("*/__init__.py")}
    missing = sorted(name for name in packages if not list((TESTS / name).glob("test_*.py")))
    assert not missing, f"packages of bert/ without a folder of tests under tests/: {missing}"


def test_the_development_table_names_every_test_file_and_only_those():
    named, existing = table_of_test_files(), suite_files()
    assert not set(named) - existing, (
        f"development.md's tests table names no such file: {sorted(set(named) - existing)}"
    )
    assert not existing - set(named), (
        f"test files missing from development.md's tests table: {sorted(existing - set(named))}"
    )


def test_every_test_file_the_docs_and_scripts_name_exists():
    sources = [*DOCUMENTS, REPO / "Makefile", *sorted((REPO / "scripts").glob("*"))]
    sources += sorted(
        path for folder in ("bert", "stages", "bench", "tests") for path in (REPO / folder).rglob("*.py")
    )
    stale = [
        f"{path.relative_to(REPO)}: {name}"
        for path in sources
        if path.is_file()
        for name in sorted(set(TEST_PATH.findall(path.read_text(encoding="utf-8", errors="replace"))))
        if not (REPO / name).is_file()
    ]
    assert not stale, "names of test files that are not there:\n" + "\n".join(stale)
