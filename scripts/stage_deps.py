"""Every stage's `deps` in dvc.yaml list exactly the project source files its command imports.

A missing file means an edit of it leaves the stage's cached outputs stale while `dvc status` says
everything is up to date; a surplus file means an edit reruns a stage it cannot affect. The import
closure is read statically from the source (every `import` statement, also those inside
functions), so lazily imported modules count too.

    python -m scripts.stage_deps            # lists the problems (tests/test_stage_deps.py runs the same check)
    python -m scripts.stage_deps --write    # rewrites the source-file lines of every stage's deps in dvc.yaml
                                            # (keeping its comments, data deps and order of stages)
"""

import ast
import re
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
PROJECT_PACKAGES = ("bert", "stages", "bench", "sample_world")


def module_file(module: str, root: Path = REPO) -> Path | None:
    """The source file of a project module (a package's __init__.py), or None if it is not ours."""
    if module.split(".")[0] not in PROJECT_PACKAGES:
        return None
    base = root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def imported_modules(source: Path, root: Path = REPO) -> set[str]:
    """The project modules that importing `source` loads: what it names, and the packages above."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"), filename=str(source))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            # `from bert import atomic` imports the module bert.atomic
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    found = set()
    for name in names:
        parts = name.split(".")
        for depth in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__ and a/b/__init__
            prefix = ".".join(parts[:depth])
            if module_file(prefix, root) is not None:
                found.add(prefix)
    return found


def import_closure(module: str, root: Path = REPO) -> set[Path]:
    """Source files (relative to root) of `module`, the packages above it and all they import."""
    todo = [".".join(module.split(".")[:depth]) for depth in range(1, len(module.split(".")) + 1)]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen or module_file(name, root) is None:
            continue
        seen.add(name)
        todo.extend(imported_modules(module_file(name, root), root) - seen)
    return {module_file(name, root).relative_to(root) for name in seen}


def foreach_keys(stage: dict, params: dict) -> list[str]:
    """The names of a `foreach` stage's instances (`name@<key>`): a list's items, or the keys of a
    params dict or list named as `${section}` or `${section.key}`."""
    items = stage["foreach"]
    if isinstance(items, str):
        match = re.fullmatch(r"\$\{([\w.-]+)\}", items.strip())
        if not match:
            raise AssertionError(f"dvc.yaml: foreach {items!r} is neither a list nor ${{params.key}}")
        items = params
        for part in match.group(1).split("."):
            items = items[part]
    return [str(key) for key in items]


def expanded_stages(dvc_yaml: Path = REPO / "dvc.yaml") -> dict[str, dict]:
    """dvc.yaml's stages with `foreach` expanded (`name@key`, `${item}` / `${key}` substituted)."""
    params = yaml.safe_load((dvc_yaml.parent / "params.yaml").read_text())
    stages = {}
    for name, stage in yaml.safe_load(dvc_yaml.read_text())["stages"].items():
        if "foreach" not in stage:
            stages[name] = stage
            continue
        for key in foreach_keys(stage, params):
            text = yaml.safe_dump(stage["do"]).replace("${item}", key).replace("${key}", key)
            stages[f"{name}@{key}"] = yaml.safe_load(text)
    return stages


def command_module(cmd: str) -> str:
    match = re.match(r"python -m ([\w.]+)", cmd)
    if not match:
        raise AssertionError(f"dvc.yaml: command {cmd!r} does not start with `python -m MODULE`")
    return match.group(1)


def listed_sources(deps: list[str], root: Path = REPO) -> tuple[set[Path], list[Path]]:
    """The project .py files a deps list names, and the folders it names (which cover their content)."""
    files, folders = set(), []
    for dep in deps:
        path = Path(dep)
        if (root / path).is_dir():
            folders.append(path)
        elif path.suffix == ".py":
            files.add(path)
    return files, folders


def stage_dep_problems(root: Path = REPO) -> list[str]:
    problems = []
    for name, stage in expanded_stages(root / "dvc.yaml").items():
        closure = import_closure(command_module(stage["cmd"]), root)
        files, folders = listed_sources(stage.get("deps", []), root)
        for missing in sorted(closure - files):
            if not any(folder in missing.parents for folder in folders):
                problems.append(f"stage {name}: imports {missing}, which its deps do not list")
        for surplus in sorted(files - closure):
            problems.append(f"stage {name}: lists {surplus} in deps, which it does not import")
    return problems


def write_source_deps(dvc_yaml: Path = REPO / "dvc.yaml") -> None:
    """Set each stage's project source deps to its import closure; other deps follow, as they were."""
    from ruamel.yaml import YAML  # DVC's own YAML library: keeps comments and layout

    yaml_rt = YAML()
    yaml_rt.indent(mapping=2, sequence=4, offset=2)
    yaml_rt.width = 4096
    document = yaml_rt.load(dvc_yaml.read_text())
    expanded = expanded_stages(dvc_yaml)
    params = yaml.safe_load((dvc_yaml.parent / "params.yaml").read_text())
    for name, stage in document["stages"].items():
        body = stage.get("do", stage)
        instances = [f"{name}@{key}" for key in foreach_keys(stage, params)] if "foreach" in stage else [name]
        closures = {frozenset(import_closure(command_module(expanded[each]["cmd"]))) for each in instances}
        assert len(closures) == 1, f"{name}: its foreach items import different modules"
        sources = [str(path) for path in sorted(closures.pop())]
        others = [dep for dep in body.get("deps", []) if not str(dep).endswith(".py")]
        body["deps"] = sources + others
    with open(dvc_yaml, "w") as file:
        yaml_rt.dump(document, file)


def main() -> None:
    if "--write" in sys.argv[1:]:
        write_source_deps()
    problems = stage_dep_problems()
    print("\n".join(problems) if problems else "dvc.yaml deps are exact")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
