"""Folders are replaced in one step: at no moment is there neither the old folder nor the new one. Files
written through a temporary file get the mode of any new file. An output folder is checked before any work:
it holds nothing but an earlier output of its kind, and it can be made."""

import os
import stat
from pathlib import Path

import pytest

from quoter import atomic_files
from quoter.atomic_files import check_output_folder, write_folder_atomic, write_json_atomic
from quoter.errors import InputError


def test_a_folder_is_swapped_for_its_new_version_in_one_step(tmp_path, monkeypatch):
    target = tmp_path / "out"
    write_folder_atomic(target, lambda folder: (folder / "version").write_text("1"))
    seen = []
    swap = atomic_files._exchange

    def watched_swap(first, second):
        swapped = swap(first, second)
        seen.append((swapped, (target / "version").read_text()))
        return swapped

    monkeypatch.setattr(atomic_files, "_exchange", watched_swap)
    write_folder_atomic(target, lambda folder: (folder / "version").write_text("2"))
    # Right after the one step the new folder is in place; the old one, swapped out, is then deleted.
    assert seen == [(True, "2")]
    assert [path.name for path in tmp_path.iterdir()] == ["out"] and (target / "version").read_text() == "2"


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_a_file_written_atomically_has_the_mode_the_umask_gives_any_new_file(tmp_path, umask):
    old = os.umask(umask)
    try:
        write_json_atomic(tmp_path / "atomic.json", {"a": 1})
        (tmp_path / "plain.json").write_text("{}")
    finally:
        os.umask(old)
    assert (
        stat.S_IMODE((tmp_path / "atomic.json").stat().st_mode)
        == stat.S_IMODE((tmp_path / "plain.json").stat().st_mode)
        == 0o666 & ~umask
    )
    assert sorted(path.name for path in tmp_path.iterdir()) == ["atomic.json", "plain.json"]


def _holds_only_version(folder):
    """The entries of `folder` that are not an earlier output of the test's kind (a file named version)."""
    return sorted(path.name for path in folder.iterdir() if path.name != "version")


@pytest.mark.parametrize("state", ["missing", "empty", "earlier output"])
def test_an_output_folder_may_be_missing_empty_or_an_earlier_output(tmp_path, state):
    target = tmp_path / "out"
    if state != "missing":
        target.mkdir()
    if state == "earlier output":
        (target / "version").write_text("1")
    check_output_folder(target, "--out", "an earlier output", _holds_only_version)


def test_an_output_folder_holding_other_files_is_refused_and_left_as_it_was(tmp_path):
    target = tmp_path / "out"
    (target / "sub").mkdir(parents=True)
    (target / "sub" / "notes.md").write_text("mine")
    for name in ("version", "precious.txt", "a", "b"):
        (target / name).write_text("mine")
    with pytest.raises(InputError) as error:
        check_output_folder(target, "--out", "an earlier output", _holds_only_version)
    others = "a, b, precious.txt, ..."
    assert (
        str(error.value)
        == f"{target}: holds other files than an earlier output ({others}); give --out a new or empty folder"
    )
    assert sorted(path.name for path in target.rglob("*")) == ["a", "b", "notes.md", "precious.txt", "sub", "version"]


@pytest.mark.parametrize(
    ("place", "message"),
    [
        ("file", "file: is not a folder; give --out a folder name"),
        ("file/sub", "file/sub: cannot write --out here: {tmp}/file is not a folder"),
        ("file/sub/deeper", "file/sub/deeper: cannot write --out here: {tmp}/file is not a folder"),
    ],
)
def test_an_output_folder_where_no_folder_can_be_made_is_refused(tmp_path, place, message):
    (tmp_path / "file").write_text("mine")
    with pytest.raises(InputError) as error:
        check_output_folder(tmp_path / place, "--out", "an earlier output", _holds_only_version)
    assert str(error.value) == f"{tmp_path}/{message.format(tmp=tmp_path)}"
    assert (tmp_path / "file").read_text() == "mine"


def test_an_output_folder_in_a_place_that_takes_no_new_file_is_refused():
    # As root, the permissions let anything be written there; nothing can be created, though.
    with pytest.raises(InputError, match=r"^/proc/quoter-out: cannot write --out here: /proc takes no new file"):
        check_output_folder(Path("/proc/quoter-out"), "--out", "an earlier output", _holds_only_version)
