"""Folders are replaced in one step: at no moment is there neither the old folder nor the new one. Files
written through a temporary file get the mode of any new file."""

import os
import stat

import pytest

from quoter import atomic_files
from quoter.atomic_files import write_folder_atomic, write_json_atomic


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
