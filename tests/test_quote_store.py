"""The saved live quote set: a process killed at any point of a change or a compaction loses no acknowledged
change and gives no id twice after a restart; leftovers are cleaned at the next open; a process with an
out-of-date copy of the set cannot change it."""

import json
import signal
import subprocess
import sys

import faiss
import numpy as np
import pytest

from quoter.errors import InputError, QuoterError
from quoter.quote_record import QuoteRecord
from quoter.serving.live.live_quotes import LIVE_FOLDER, LiveQuotes, QuoteConflictError
from quoter.serving.live.quote_store import LOCK_FILE, SNAPSHOT_FILE, QuoteStore, StoredQuotes, log_name
from tests.serving_fixtures import tiny_bundle

DIM = 4
# Run in a child process: open the store, make the changes named on the command line (+TEXT adds a quote,
# -ID removes one), printing each acknowledged id, and be killed (SIGKILL) at the named point.
CHILD = """
import os, signal, sys
from pathlib import Path
import numpy as np
from quoter.quote_record import QuoteRecord
from quoter.serving.live import quote_store
from tests.test_quote_store import base_quotes

folder, kill_at, changes = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
die = lambda: os.kill(os.getpid(), signal.SIGKILL)
real_pwrite, real_replace = os.pwrite, os.replace
if kill_at == "before-rename":  # compaction wrote the new snapshot but did not rename it into place
    os.replace = lambda *args: die()
if kill_at == "after-rename":  # compaction renamed the new snapshot but did not delete the old log
    os.replace = lambda *args: real_replace(*args) + die()
store, quotes = quote_store.QuoteStore.open(folder, base_quotes())
next_id = quotes.next_id
for change in changes:
    if kill_at == "mid-line" and change == changes[-1]:  # the last change's line is half written
        os.pwrite = lambda fd, data, at: real_pwrite(fd, data[: len(data) // 2], at) + die()
    if change.startswith("+"):
        store.add(next_id, QuoteRecord(change[1:]), np.full(4, next_id, np.float32))
        print(next_id, flush=True)
        next_id += 1
    else:
        store.remove(int(change[1:]))
        print(change, flush=True)
"""


def base_quotes() -> StoredQuotes:
    """What a bundle of three quotes starts from."""
    records = {i: QuoteRecord(f"quote {i}") for i in range(3)}
    return StoredQuotes(records, np.stack([np.full(DIM, i, np.float32) for i in range(3)]), 3)


def run_child(folder, kill_at, *changes):
    """Run CHILD; return the changes it acknowledged and whether it was killed."""
    done = subprocess.run([sys.executable, "-c", CHILD, str(folder), kill_at, *changes], capture_output=True, text=True)
    assert done.returncode in (0, -signal.SIGKILL), done.stderr
    return done.stdout.split(), done.returncode == -signal.SIGKILL


def reopen(folder):
    store, quotes = QuoteStore.open(folder, base_quotes())
    for quote_id, vector in zip(quotes.records, quotes.vectors):  # every vector still belongs to its quote
        assert (vector == quote_id).all()
    return store, quotes


def test_a_kill_while_a_change_is_written_loses_only_that_unacknowledged_change(tmp_path):
    folder = tmp_path / "quote_index"
    acknowledged, killed = run_child(folder, "mid-line", "+a", "-0", "+b", "+c")
    assert killed and acknowledged == ["3", "-0", "4"]
    store, quotes = reopen(folder)
    assert sorted(quotes.records) == [1, 2, 3, 4] and quotes.records[4] == QuoteRecord("b")
    # The half-written quote 5 was never acknowledged; no id given out is given again.
    assert quotes.next_id == 5
    store.add(5, QuoteRecord("d"), np.full(DIM, 5, np.float32))
    del store
    assert sorted(reopen(folder)[1].records) == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("kill_at", ["before-rename", "after-rename"])
def test_a_kill_while_compacting_leaves_the_old_or_the_new_snapshot(tmp_path, kill_at):
    folder = tmp_path / "quote_index"
    assert run_child(folder, "none", "+a", "-1", "+b") == (["3", "-1", "4"], False)
    # The next open compacts the three changes into a snapshot, and is killed doing so.
    assert run_child(folder, kill_at) == ([], True)
    leftover = folder / (SNAPSHOT_FILE + ".tmp") if kill_at == "before-rename" else folder / log_name(0)
    assert leftover.exists()
    store, quotes = reopen(folder)
    assert sorted(quotes.records) == [0, 2, 3, 4] and quotes.next_id == 5
    assert sorted(path.name for path in folder.iterdir()) == [LOCK_FILE, SNAPSHOT_FILE]
    store.add(5, QuoteRecord("c"), np.full(DIM, 5, np.float32))
    store.remove(0)
    del store
    store, quotes = reopen(folder)
    assert sorted(quotes.records) == [2, 3, 4, 5] and quotes.next_id == 6


def test_only_one_process_changes_a_set_and_never_from_an_old_copy(tmp_path):
    folder = tmp_path / "quote_index"
    writer, _ = QuoteStore.open(folder, base_quotes())
    reader, _ = QuoteStore.open(folder, base_quotes())
    writer.add(3, QuoteRecord("a"), np.full(DIM, 3, np.float32))
    with pytest.raises(QuoterError, match="another process is changing these quotes"):
        reader.add(3, QuoteRecord("b"), np.full(DIM, 3, np.float32))
    del writer
    # The writer is gone, but the reader's copy lacks quote 3: it would give id 3 again.
    with pytest.raises(QuoterError, match="changed these quotes since they were loaded"):
        reader.add(3, QuoteRecord("b"), np.full(DIM, 3, np.float32))


def test_a_damaged_line_before_the_last_is_an_error_with_its_place(tmp_path):
    folder = tmp_path / "quote_index"
    run_child(folder, "none", "+a", "+b")
    log = folder / log_name(0)
    lines = log.read_text(encoding="utf-8").splitlines(keepends=True)
    log.write_text('{"id": 3, "quote": "a"}\n' + lines[1], encoding="utf-8")
    with pytest.raises(InputError, match=r"changes\.0\.jsonl:1: expected"):
        QuoteStore.open(folder, base_quotes())


def test_a_set_saved_in_the_layout_before_the_log_is_read_and_converted(tmp_path):
    folder = tmp_path / "quote_index"
    folder.mkdir()
    ids = np.array([1, 2, 7])
    index = faiss.IndexIDMap2(faiss.IndexFlatIP(DIM))
    index.add_with_ids(np.stack([np.full(DIM, i, np.float32) for i in ids]), ids)
    faiss.write_index(index, str(folder / "index.faiss"))
    (folder / "quotes.jsonl").write_text(
        "".join(json.dumps({"id": int(i), "quote": f"q{i}", "source": ""}) + "\n" for i in ids), encoding="utf-8"
    )
    (folder / "settings.json").write_text('{"next_id": 9}\n', encoding="utf-8")
    _, quotes = reopen(folder)
    assert list(quotes.records) == [1, 2, 7] and quotes.next_id == 9 and quotes.records[7] == QuoteRecord("q7")
    assert sorted(path.name for path in folder.iterdir()) == [LOCK_FILE, SNAPSHOT_FILE]
    assert reopen(folder)[1].records == quotes.records


def test_refused_adds_save_nothing(tmp_path):
    # A quote that shows nothing (a NUL one ranked first for junk contexts), or a listed quote given another
    # source, is refused before anything is saved: the reopened set is the bundle's.
    bundle = tiny_bundle(tmp_path)
    live = LiveQuotes.from_bundle(bundle, folder=tmp_path)
    for text in ("\0", "\u200b\ufeff", "\u0301\u0308", " \u2060\u00ad "):
        with pytest.raises(InputError, match="field 'quote'"):
            live.add(QuoteRecord(text))
    with pytest.raises(QuoteConflictError, match="listed, as id 1, with another source"):
        live.add(QuoteRecord("the dog ran home", "Elsewhere"))
    assert live.add(QuoteRecord("the dog ran home", "Farm")) == (1, False)
    del live  # the process ends: its lock on the saved set goes
    base = StoredQuotes.of_set(bundle.quote_set())
    _, saved = QuoteStore.open(tmp_path / LIVE_FOLDER, base)
    assert saved.records == base.records and saved.next_id == base.next_id
