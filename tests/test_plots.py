"""`dvc plots show` as a user opens it: every chart of dvc.yaml's `plots` draws, with its data.

DVC writes one HTML page that loads Vega from a CDN and gives each chart a `<div id="<title>">`
and a script `vegaEmbed('#<title>', spec)`. The test runs `dvc plots show` on the project's
committed curves (dvclive/, tracked in git: no training runs) in a copy of the project, then for
each chart checks what a browser needs: the id is a CSS identifier and the script names it in a
well-formed string (an apostrophe in a title broke both, and that chart stayed blank), and its
Vega-Lite spec renders offline (vl-convert, Vega's own renderer without a browser) to one line
per curve file, through every point of that file.
"""

import csv
import json
import os
import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO

vl_convert = pytest.importorskip("vl_convert", reason="test extra vl-convert-python is not installed")

BIN = Path(REPO / ".venv/bin") if (REPO / ".venv/bin/dvc").exists() else Path()
CSS_IDENTIFIER = re.compile(r"-?[_a-zA-Z][_a-zA-Z0-9-]*")
EMBED = re.compile(r"\s*var spec = (\{.*\});\s*vegaEmbed\('#([^'\\]*)', spec\);\s*", re.DOTALL)
VEGA_LITE = "5.8"  # the oldest vl-convert bundles; the page loads vega-lite 5.2 (same spec language)


class Charts(HTMLParser):
    """The page's charts: (div id, the text of the script inside the div)."""

    def __init__(self):
        super().__init__()
        self.charts: list[list[str]] = []
        self.div: str | None = None
        self.in_script = False

    def handle_starttag(self, tag, attrs):
        if tag == "div" and dict(attrs).get("id"):
            self.div = dict(attrs)["id"]
        elif tag == "script" and self.div is not None:
            self.in_script = True
            self.charts.append([self.div, ""])

    def handle_endtag(self, tag):
        if tag == "script":
            self.in_script = False
        elif tag == "div":
            self.div = None

    def handle_data(self, data):
        if self.in_script:
            self.charts[-1][1] += data


def plots_of(dvc_yaml: Path) -> dict[str, list[str]]:
    """dvc.yaml's charts: title -> the curve files it draws."""
    return {
        title: list(chart["y"])
        for entry in yaml.safe_load(dvc_yaml.read_text())["plots"]
        for title, chart in entry.items()
    }


def rows(tsv: Path) -> int:
    with open(tsv, newline="") as file:
        return sum(1 for _ in csv.DictReader(file, delimiter="\t"))


def lines_drawn(scenegraph) -> dict[str, list[list[dict]]]:
    """The line marks of a rendered chart, by mark name: each line's points."""
    found: dict[str, list[list[dict]]] = {}

    def walk(node):
        if isinstance(node, dict):
            if node.get("marktype") == "line" and node.get("role") == "mark":
                found.setdefault(node.get("name"), []).append(node.get("items", []))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(scenegraph)
    return found


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> tuple[Path, str]:
    """`dvc plots show` in a copy of the project's DVC files and curves: (the copy, the page's HTML)."""
    project = tmp_path_factory.mktemp("plots")
    for name in ("dvc.yaml", "params.yaml"):
        (project / name).write_bytes((REPO / name).read_bytes())
    subprocess.run(["cp", "-r", str(REPO / "dvclive"), str(project / "dvclive")], check=True)
    subprocess.run([BIN / "dvc", "init", "--no-scm", "--quiet"], cwd=project, check=True)
    subprocess.run([BIN / "dvc", "plots", "show", "-o", "page"], cwd=project, check=True, capture_output=True,
                   env={**os.environ, "DVC_NO_ANALYTICS": "1"})  # fmt: skip
    return project, (project / "page" / "index.html").read_text(encoding="utf-8")


def test_every_chart_of_dvc_yaml_draws_with_its_data(page):
    project, html = page
    parser = Charts()
    parser.feed(html)
    plots = plots_of(project / "dvc.yaml")
    assert len(parser.charts) == len(plots), "a chart of dvc.yaml is missing from the page"
    for (div, script), (title, files) in zip(parser.charts, plots.items()):
        assert CSS_IDENTIFIER.fullmatch(div), f"{title!r}: its element id {div!r} is no CSS selector"
        embedded = EMBED.fullmatch(script)
        assert embedded, f"{title!r}: the page's script does not parse: {script[-120:]!r}"
        spec, selector = json.loads(embedded[1]), embedded[2]
        assert selector == div and spec["title"]["text"] == title
        present = [file for file in files if (project / file).is_file()]
        assert present, f"{title!r}: none of its curves is in dvclive/"
        drawn = lines_drawn(vl_convert.vegalite_to_scenegraph(spec, vl_version=VEGA_LITE))
        # The raw curves (the layer besides the smoothed one): a line per file, a point per row.
        expected = sorted(rows(project / file) for file in present)
        assert expected in [sorted(map(len, lines)) for lines in drawn.values()], (title, drawn.keys())
        for lines in drawn.values():
            for points in lines:
                assert all(isinstance(point.get("y"), (int, float)) for point in points), title
