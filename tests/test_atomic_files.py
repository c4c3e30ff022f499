"""Folders are replaced in one step: at no moment is there neither the old folder nor the new one."""

from quoter import atomic_files
from quoter.atomic_files import write_folder_atomic


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
