"""The commands that write a folder (`quoter train --output`, `quoter data build --out`) replace it only when
it is missing, empty or an earlier output of their own; anything else, and a place where no folder can be
made, is refused in one line before any work, touching nothing."""

import json

import pytest
from typer.testing import CliRunner

from quoter.cli import app
from quoter.errors import InputError
from quoter.training import pipeline


class DataLoaded(Exception):
    """Raised where `quoter train` would read its data: the checks before it passed."""


@pytest.fixture
def no_training(monkeypatch):
    """`quoter train` stops where it would start reading its data and loading the model."""

    def loading(*args, **kwargs):
        raise DataLoaded

    monkeypatch.setattr(pipeline, "load_dataset", loading)


def foreign_folder(tmp_path):
    """A folder of someone's own files, one of them in a subfolder."""
    folder = tmp_path / "mine"
    (folder / "sub").mkdir(parents=True)
    (folder / "precious.txt").write_text("keep me", encoding="utf-8")
    (folder / "sub" / "notes.md").write_text("and me", encoding="utf-8")
    return folder


def contents(folder):
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def train(tmp_path, output):
    return CliRunner().invoke(app, ["train", "--data", str(tmp_path / "data.txt"), "--output", str(output)])


def test_train_refuses_a_folder_of_other_files_before_it_reads_anything(tmp_path, no_training):
    folder = foreign_folder(tmp_path)
    kept = contents(folder)
    refused = train(tmp_path, folder)
    assert isinstance(refused.exception, InputError)
    assert str(refused.exception) == (
        f"{folder}: holds other files than an earlier bundle (precious.txt, sub); give --output a new or empty folder"
    )
    assert contents(folder) == kept and sorted(path.name for path in tmp_path.iterdir()) == ["mine"]


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ("file", "{tmp}/file: is not a folder; give --output a folder name"),
        ("file/sub", "{tmp}/file/sub: cannot write --output here: {tmp}/file is not a folder"),
        ("/proc/quoter-bundle", "/proc/quoter-bundle: cannot write --output here: /proc takes no new file"),
    ],
)
def test_train_refuses_a_place_where_no_bundle_folder_can_be_made(tmp_path, no_training, output, message):
    (tmp_path / "file").write_text("keep me", encoding="utf-8")
    refused = train(tmp_path, tmp_path / output)
    assert isinstance(refused.exception, InputError)
    assert str(refused.exception).startswith(message.format(tmp=tmp_path))
    assert (tmp_path / "file").read_text(encoding="utf-8") == "keep me"


@pytest.mark.parametrize("earlier", [None, {}, {"format": "quoter-bundle", "version": 2}])
def test_train_goes_on_into_a_new_or_empty_folder_or_over_an_earlier_bundle(tmp_path, no_training, earlier):
    folder = tmp_path / "bundle"
    if earlier is not None:
        folder.mkdir()
    if earlier:
        (folder / "bundle.json").write_text(json.dumps(earlier), encoding="utf-8")
        (folder / "quotes.jsonl").write_text("", encoding="utf-8")
    assert isinstance(train(tmp_path, folder).exception, DataLoaded)


def test_train_takes_a_bundle_json_of_another_format_for_no_bundle(tmp_path, no_training):
    folder = tmp_path / "bundle"
    folder.mkdir()
    (folder / "bundle.json").write_text(json.dumps({"format": "other"}), encoding="utf-8")
    refused = train(tmp_path, folder)
    assert isinstance(refused.exception, InputError) and "holds other files than an earlier bundle" in str(
        refused.exception
    )


def data_build(tmp_path, out):
    quotes = tmp_path / "quotes.tsv"
    quotes.write_text("quote\tsource\nfortune favours the brave\t\n", encoding="utf-8")
    args = ["data", "build", "--lang", "en", "--quotes", str(quotes), "--corpus", str(tmp_path / "no-corpus")]
    return CliRunner().invoke(app, [*args, "--out", str(out), "--no-stanza", "--no-progress"])


@pytest.mark.parametrize(
    ("out", "message"),
    [
        ("mine", "{tmp}/mine: holds other files than an earlier build's data.txt, splits.json, stats.md (precious"),
        ("file", "{tmp}/file: is not a folder; give --out a folder name"),
        ("file/sub", "{tmp}/file/sub: cannot write --out here: {tmp}/file is not a folder"),
        ("/proc/quoter-data", "/proc/quoter-data: cannot write --out here: /proc takes no new file"),
    ],
)
def test_data_build_refuses_the_same_folders_before_it_reads_its_corpus(tmp_path, out, message):
    folder = foreign_folder(tmp_path)
    kept = contents(folder)
    (tmp_path / "file").write_text("keep me", encoding="utf-8")
    refused = data_build(tmp_path, tmp_path / out)
    # The corpus is missing: had the build begun, that would be the complaint.
    assert isinstance(refused.exception, InputError)
    assert str(refused.exception).startswith(message.format(tmp=tmp_path))
    assert contents(folder) == kept and (tmp_path / "file").read_text(encoding="utf-8") == "keep me"
