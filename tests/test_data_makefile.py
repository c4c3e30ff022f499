"""`make -C data TARGET` without the shared data: one line naming SHARED_DATA, and nothing written."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent.parent / "data"


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
@pytest.mark.parametrize(
    ("target", "missing"), [("en", "en/books/MANIFEST.tsv"), ("zh-modern", "zh-modern/cm_translations/MANIFEST.tsv")]
)
def test_a_target_without_the_shared_data_stops_in_one_line_before_writing_anything(tmp_path, target, missing):
    shared, built = tmp_path / "no-shared-data", tmp_path / "built"
    done = subprocess.run(
        ["make", "-s", "-C", str(DATA), target, f"SHARED_DATA={shared}", f"BUILT={built}", f"PYTHON={sys.executable}"],
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0 and "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if not line.startswith("make: ")]  # make's own folder lines
    assert len(lines) == 1 and f"SHARED_DATA={shared} has no {missing}; point SHARED_DATA at" in lines[0]
    assert not built.exists()


def test_the_sources_file_is_written_whole_or_not_at_all(tmp_path):
    script = [sys.executable, str(DATA / "corpus_sources.py")]
    missing = subprocess.run(
        [*script, str(tmp_path / "MANIFEST.tsv"), str(tmp_path / "sources.tsv")], capture_output=True, text=True
    )
    assert missing.returncode == 1 and missing.stderr.strip().splitlines() == [
        f"{tmp_path / 'MANIFEST.tsv'}: cannot read the manifest: No such file or directory"
    ]
    assert not (tmp_path / "sources.tsv").exists()
    (tmp_path / "MANIFEST.tsv").write_text("file\tbook\n01.txt\t史记\n", encoding="utf-8")
    written = subprocess.run([*script, str(tmp_path / "MANIFEST.tsv"), str(tmp_path / "sources.tsv")])
    assert written.returncode == 0
    assert (tmp_path / "sources.tsv").read_text(encoding="utf-8") == "file\tsource\n01.txt\t史记\n01.txt\t司马迁\n"
