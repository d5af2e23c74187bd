"""params.yaml is read through one typed schema and rejected early with messages naming the param."""

import re
import shutil
from pathlib import Path

import pytest
import yaml

from bert.errors import UserError
from stages.params import load_params

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A copy of params.yaml in a temp folder whose sample sources exist (empty files suffice)."""
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    for corpus in raw["corpora"].values():
        for source in corpus["sources"]:
            (tmp_path / source).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / source).touch()
    monkeypatch.chdir(tmp_path)

    def write(**changes) -> Path:
        data = yaml.safe_load((REPO / "params.yaml").read_text())
        for dotted, value in changes.items():
            *parents, last = dotted.split("__")
            node = data
            for key in parents:
                node = node[key]
            node[last] = value
        (tmp_path / "params.yaml").write_text(yaml.safe_dump(data))
        return tmp_path / "params.yaml"

    return write


def test_repository_params_are_valid(project):
    project()
    params = load_params()
    assert params.examples.phase1.max_seq_length == 128
    assert params.examples.phase2.max_seq_length == 512
    assert params.workers >= 1


def test_numbers_written_as_strings_are_numbers(project):
    # `dvc exp run -S finetune.learning_rate=6e-5` writes 6e-05, which YAML 1.1 reads as a string.
    path = project()
    text = re.sub(r"(\nfinetune:\n(?:  .*\n)*?  learning_rate: )\S+", r"\g<1>6e-05", path.read_text())
    path.write_text(text)
    assert yaml.safe_load(path.read_text())["finetune"]["learning_rate"] == "6e-05"
    assert load_params().finetune.learning_rate == pytest.approx(6e-5)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"model__size": "huge"}, "`model.size` is 'huge'; allowed: tiny, mini, base, large"),
        (
            {"examples__phase1": {"max_seq_length": 128, "max_predictions_per_seq": 200}},
            "examples.phase1.max_predictions_per_seq",
        ),
        (
            {"pretrain__phase1": {"max_steps": -5, "batch_size": 8, "learning_rate": 0.001}},
            "`pretrain.phase1.max_steps` must be >= 1",
        ),
        ({"mixing__mode": "blend"}, "`mixing.mode` is 'blend'; allowed: intra, inter"),
        (
            {"corpora__wikipedia": {"sources": ["missing/dump.xml.bz2"]}},
            "missing/dump.xml.bz2 does not exist",
        ),
        (
            {"finetune__init": "bert-huge"},
            "`finetune.init` is 'bert-huge'; allowed: phase2, random, hf:<dir>",
        ),
        ({"finetune__learning_rate": "fast"}, "`finetune.learning_rate` must be a number"),
        ({"shard__colour": "blue"}, "unknown key `shard.colour`"),
    ],
)
def test_invalid_params_are_rejected_naming_the_param(project, change, expected):
    project(**change)
    with pytest.raises(UserError) as error:
        load_params()
    assert expected in str(error.value)


def test_invalid_params_fail_the_stage_before_any_work(project, tmp_path):
    import subprocess
    import sys

    project(model__size="huge")
    shutil.copytree(REPO / "stages", tmp_path / "stages")
    shutil.copytree(REPO / "bert", tmp_path / "bert")
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from bert.errors import run_main; from stages.params import load_params; run_main(load_params)",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "`model.size` is 'huge'" in result.stderr
