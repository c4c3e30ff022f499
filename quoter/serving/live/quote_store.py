"""The live quote set on disk: a snapshot and an append-only log of changes. A change costs one appended,
fsynced line whatever the size of the set, and every state on disk is the one before a change or the one
after it:

    quote_index/snapshot.jsonl      a header {"format", "version", "generation", "next_id", "dim"}, then
                                    {"id", "quote", "source"[, "gloss"], "vector"[, "examples"]} per quote
                                    (the vector in base64, little-endian float32; "examples": the usage
                                    examples it was added with, [{"left", "right", "vector"}, ...], each with
                                    its context vector); only ever replaced whole, by a rename
    quote_index/changes.G.jsonl     the changes since snapshot G, one line each: an added quote as above, or
                                    {"removed": id}; a change is acknowledged only once its line is fsynced
    quote_index/lock                locked (flock) by the one process that changes the set
    quote_index/origin.json         which base set the changes were made to: {"quotes", "encoder", "digest"}

A quote's usage examples are part of its line, so an add is saved whole or not at all. They are optional in
every line, so a set saved before quotes had examples reads as it is (and the version stays 1).

Without a snapshot the set starts from the bundle's own quotes (ids = line numbers) as generation 0.
Opening replays the log over the snapshot; a last line cut short by a crash was never acknowledged and is
dropped. Once the log holds a change per COMPACT_EVERY quotes of the set, opening also compacts: the whole
set goes to a temporary file that is fsynced and renamed over the snapshot as generation G + 1, and only
then is the old log deleted; so a restart replays at most that many changes more than it reads quotes, and
the compaction, paid once per that many changes, costs each change the same whatever the size. A kill
at any moment leaves either snapshot G with its log or snapshot G + 1; what is left over (temporary files,
the logs of older generations) is deleted at the next open.

The changes only mean something over the base set they were made to (its ids, its quote encoder): the first
change records that base's origin, and a store opened over another base (a newer built-in bank, another
model, another bundle given the same state folder) is refused rather than mixed with it.

One process changes a set: its first change takes the lock (a server takes it at its start: `hold`) and keeps
it until the store is closed. A process whose copy of the set is out of date (another one changed it since it
was read) is refused, so no id is ever given twice.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import faiss
import numpy as np

from quoter.atomic_files import fsync_path, write_json_atomic
from quoter.errors import InputError, QuoterError
from quoter.quote_record import QuoteRecord
from quoter.quote_set import QuoteSet, parse_quote_item, quote_item, text_vector, vector_text
from quoter.ranking import Query
from quoter.text_lines import json_object

STORE_FORMAT = "quoter-quote-set"
STORE_VERSION = 1
SNAPSHOT_FILE = "snapshot.jsonl"
LOCK_FILE = "lock"
ORIGIN_FILE = "origin.json"
TEMPORARY_SUFFIX = ".tmp"
# The layout before the log: a faiss index, the records and the next id, rewritten whole at every change.
LEGACY_FILES = ("index.faiss", "quotes.jsonl", "settings.json")
COMPACT_EVERY = 8


class ChangeNotSavedError(QuoterError):
    """A change could not be saved (a folder that cannot be written, a full disk, another process), so it was
    not made; the subclasses name the cause where it is known."""


class FolderNotWritableError(ChangeNotSavedError):
    """The folder changes are saved in cannot be written: read-only, not a folder, or not this process's."""


class NoSpaceError(ChangeNotSavedError):
    """The disk, or the user's quota, has no room left for the change."""


class SetLockedError(ChangeNotSavedError):
    """Another process holds the lock of the set saved in `folder`: it changes the set, and only it may."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        super().__init__(f"{folder}: another process is changing these quotes; stop it to change them here")


class StaleCopyError(ChangeNotSavedError):
    """Another process changed the set since this one read it: a change from this copy could give an id twice."""


# The causes of a failed write that say which error it is; any other is a plain ChangeNotSavedError.
NOT_WRITABLE = (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOTDIR, errno.EEXIST, errno.EISDIR)
NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


def _not_saved(cause: BaseException | None, message: str) -> ChangeNotSavedError:
    """The error of a change that `cause` (an OSError, or None when unknown) kept from being saved, of the
    kind the cause makes it."""
    code = getattr(cause, "errno", None)
    if code in NO_SPACE:
        return NoSpaceError(message)
    if code in NOT_WRITABLE:
        return FolderNotWritableError(message)
    return ChangeNotSavedError(message)


@dataclass(frozen=True)
class UsageExamples:
    """The usage examples a quote was added with: the contexts it stands in (left and right of the gap it
    fills) and their context vectors (row i: contexts[i])."""

    contexts: tuple[Query, ...]
    vectors: np.ndarray


@dataclass
class StoredQuotes:
    """A quote set: records by id, their vectors (row i belongs to the i-th record), the next free id, and
    the usage examples of the quotes added with some, by id."""

    records: dict[int, QuoteRecord]
    vectors: np.ndarray
    next_id: int
    examples: dict[int, UsageExamples] = field(default_factory=dict)

    @classmethod
    def of_set(cls, quotes: QuoteSet) -> StoredQuotes:
        """A quote set as the live quotes start from it."""
        return cls(dict(zip(quotes.ids, quotes.records)), quotes.vectors, max(quotes.ids, default=-1) + 1)


@dataclass(frozen=True)
class StoreOrigin:
    """The base set a store's changes were made to: its size, the quote encoder that made its vectors, and a
    digest of its ids and records."""

    quotes: int
    encoder: str
    digest: str

    @classmethod
    def of(cls, base: StoredQuotes, encoder: str | None) -> StoreOrigin:
        """The origin of `base`, whose vectors `encoder` (an identity; None: an encoder never saved) made."""
        digest = hashlib.sha256()
        for quote_id, record in base.records.items():
            digest.update(json.dumps([quote_id, record.to_json()], ensure_ascii=False).encode("utf-8"))
        return cls(len(base.records), str(encoder), digest.hexdigest())

    def describe(self) -> str:
        return f"{self.quotes:,} quotes encoded by {self.encoder}"


def _check_origin(folder: Path, origin: StoreOrigin | None) -> None:
    """Refuse a store whose changes were made to another base set than `origin` (None: any base)."""
    path = folder / ORIGIN_FILE
    if origin is None or not path.is_file():
        return
    try:
        saved = StoreOrigin(**json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        raise InputError('expected {"quotes", "encoder", "digest"}', path=path) from None
    if saved != origin:
        raise InputError(
            f"holds quote changes made to another quote set ({saved.describe()}), not to the one served now "
            f"({origin.describe()}): serve the set they were made to, or move the folder away to start afresh",
            path=folder,
        )


def log_name(generation: int) -> str:
    """The file that holds the changes made since snapshot `generation`."""
    return f"changes.{generation}.jsonl"


def quote_line(quote_id: int, record: QuoteRecord, vector: np.ndarray, examples: UsageExamples | None = None) -> bytes:
    """One quote of the live set as a JSON line: a quote set's line (quote_set.quote_item), with the usage
    examples it was added with, if any."""
    item = quote_item(quote_id, record, vector)
    if examples is not None:
        item["examples"] = [
            {"left": context.left, "right": context.right, "vector": vector_text(row)}
            for context, row in zip(examples.contexts, examples.vectors)
        ]
    return (json.dumps(item, ensure_ascii=False) + "\n").encode("utf-8")


def parse_examples(item: dict[str, Any], dim: int, path: Path, line: int) -> UsageExamples | None:
    """The usage examples of `quote_line`'s JSON (None when it has none); anything else, or a vector not of
    size `dim`, is an InputError at path:line."""
    if "examples" not in item:
        return None
    expected = 'expected "examples": [{"left", "right", "vector"}, ...]'
    try:
        contexts = tuple(Query(example["left"], example["right"]) for example in item["examples"])
        rows = [text_vector(example["vector"]) for example in item["examples"]]
    except (KeyError, TypeError, ValueError):
        raise InputError(expected, path=path, line=line) from None
    texts = [text for context in contexts for text in (context.left, context.right)]
    if not contexts or not all(isinstance(text, str) for text in texts) or any(len(row) != dim for row in rows):
        raise InputError(f"{expected}, at least one, with strings and vectors of size {dim}", path=path, line=line)
    return UsageExamples(contexts, np.stack(rows).astype(np.float32))


class _Replay:
    """A quote set being rebuilt from a snapshot or the bundle, then the changes of a log."""

    def __init__(self, base: StoredQuotes) -> None:
        self.dim = base.vectors.shape[1]
        self.records = dict(base.records)
        self.vectors = dict(zip(base.records, base.vectors))
        self.examples = dict(base.examples)
        self.next_id = base.next_id

    def apply(self, item: Any, path: Path, line: int) -> None:
        """Apply one line's change; a line that is no change of this set is an error at path:line."""
        if isinstance(item, dict) and set(item) == {"removed"} and isinstance(item["removed"], int):
            if self.records.pop(item["removed"], None) is None:
                raise InputError(f"removes quote {item['removed']}, which is not in the set", path=path, line=line)
            del self.vectors[item["removed"]]
            self.examples.pop(item["removed"], None)
            return
        quote_id, record, vector = parse_quote_item(item, path, line, ' or {"removed": id}')
        if quote_id in self.records or len(vector) != self.dim:
            message = f"quote {quote_id}: a repeated id, or a vector not of size {self.dim}"
            raise InputError(message, path=path, line=line)
        examples = parse_examples(item, self.dim, path, line)
        self.records[quote_id] = record
        self.vectors[quote_id] = vector
        if examples is not None:
            self.examples[quote_id] = examples
        self.next_id = max(self.next_id, quote_id + 1)

    def result(self) -> StoredQuotes:
        rows = [self.vectors[quote_id] for quote_id in self.records]
        vectors = np.stack(rows).astype(np.float32) if rows else np.zeros((0, self.dim), np.float32)
        return StoredQuotes(self.records, vectors, self.next_id, self.examples)


def _complete_lines(path: Path) -> Iterator[tuple[int, bytes, int]]:
    """(line number, line, offset after it) for each line of `path` that ends in a newline; a last line
    without one was cut short and is left out. A missing file has no lines."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        return
    with handle:
        end = 0
        for number, raw in enumerate(handle, start=1):
            if not raw.endswith(b"\n"):
                return
            end += len(raw)
            yield number, raw, end


def _parse(raw: bytes, path: Path, line: int) -> dict[str, Any]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text", path=path, line=line) from None
    return json_object(text, path, line, "a JSON object")


def _read_header(path: Path) -> dict[str, int] | None:
    """The snapshot's header {"generation", "next_id", "dim"}, or None when there is no snapshot."""
    first = next(_complete_lines(path), None)
    if first is None:
        return None
    header = _parse(first[1], path, 1)
    if not isinstance(header, dict) or header.get("format") != STORE_FORMAT:
        raise InputError(f"not a saved quote set (format is not '{STORE_FORMAT}')", path=path, line=1)
    if header.get("version") != STORE_VERSION:
        raise InputError(f"saved quote set version {header.get('version')} is not supported", path=path, line=1)
    numbers = {key: header.get(key) for key in ("generation", "next_id", "dim")}
    if not all(isinstance(value, int) for value in numbers.values()):
        raise InputError('expected integers "generation", "next_id" and "dim"', path=path, line=1)
    return numbers


def _read_snapshot(path: Path, base: StoredQuotes) -> tuple[_Replay, int] | None:
    """The snapshot's quote set and generation, or None when there is no snapshot."""
    header = _read_header(path)
    if header is None:
        return None
    if header["dim"] != base.vectors.shape[1]:
        raise InputError(f"saved for vectors of size {header['dim']}, not this bundle's", path=path, line=1)
    replay = _Replay(StoredQuotes({}, np.zeros((0, header["dim"]), np.float32), header["next_id"]))
    for number, raw, _ in _complete_lines(path):
        if number > 1:
            replay.apply(_parse(raw, path, number), path, number)
    return replay, header["generation"]


def _read_legacy(folder: Path) -> StoredQuotes | None:
    """A set saved in the layout before the log, or None when there is none."""
    index_path, quotes_path, settings_path = (folder / name for name in LEGACY_FILES)
    if not quotes_path.is_file():
        return None
    records = {}
    for number, raw, _ in _complete_lines(quotes_path):
        item = _parse(raw, quotes_path, number)
        try:
            records[int(item["id"])] = QuoteRecord.from_json(item)
        except (KeyError, TypeError, ValueError):
            raise InputError('expected {"id", "quote", "source"}', path=quotes_path, line=number) from None
    try:
        next_id = int(json.loads(settings_path.read_text(encoding="utf-8"))["next_id"])
        index = faiss.read_index(str(index_path))
        ids = np.array(list(records), dtype=np.int64)
        vectors = index.reconstruct_batch(ids) if len(ids) else np.zeros((0, index.d), np.float32)
    except (OSError, RuntimeError, ValueError, KeyError, TypeError):
        raise InputError("a quote set saved by an older Quoter that cannot be read back", path=folder) from None
    return StoredQuotes(records, vectors, max(next_id, max(records, default=-1) + 1))


class QuoteStore:
    """The saved changes of one live quote set (see the module's docstring); open it with `QuoteStore.open`."""

    # One process changes the set, so the set in memory knows which quotes are listed.
    shared = False

    def __init__(
        self, folder: Path, generation: int, log_size: int, next_id: int, origin: StoreOrigin | None = None
    ) -> None:
        self.folder = folder
        self._origin = origin
        self._next_id = next_id  # the id the next quote added through add_new gets
        self._generation = generation
        self._log_size = log_size  # bytes of acknowledged changes in the log
        # Both open from the first change on; file objects, so that the lock goes with the store.
        self._lock_file: BinaryIO | None = None
        self._log_file: BinaryIO | None = None

    @classmethod
    def open(
        cls, folder: Path, base: StoredQuotes, origin: StoreOrigin | None = None
    ) -> tuple[QuoteStore, StoredQuotes]:
        """The store in `folder` and the quote set saved there, or `base` (the bundle's quotes) when nothing
        was saved; `origin`: the base's, which changes saved there must have been made to (None: unchecked).
        Leftovers are deleted and the log compacted unless another process holds the lock."""
        if not folder.is_dir():
            return cls(folder, 0, 0, base.next_id, origin), base
        _check_origin(folder, origin)
        try:
            lock_fd: int | None = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            lock_fd = None  # a folder this process may not write to: the set is read, changes are refused
        try:
            owner = lock_fd is not None and _try_lock(lock_fd)
            quotes, generation, log_size, changes = _read_store(folder, base)
            if owner:
                _delete_leftovers(folder, generation)
                if (changes and changes * COMPACT_EVERY >= len(quotes.records)) or _legacy_present(folder):
                    generation, log_size = _compact(folder, quotes, generation), 0
        finally:
            # Closing the descriptor drops the lock: the first change takes it again.
            if lock_fd is not None:
                os.close(lock_fd)
        return cls(folder, generation, log_size, quotes.next_id, origin), quotes

    def add(
        self, quote_id: int, record: QuoteRecord, vector: np.ndarray, examples: UsageExamples | None = None
    ) -> None:
        """Save an added quote with the usage examples it was added with, in one line; once this returns, it
        survives a crash, whole."""
        self._append(quote_line(quote_id, record, vector, examples))
        self._next_id = max(self._next_id, quote_id + 1)

    def add_new(self, record: QuoteRecord, vector: np.ndarray, examples: UsageExamples | None = None) -> int:
        """Save an added quote as `add` does, under the next id of the set (never given before); return it."""
        quote_id = self._next_id
        self.add(quote_id, record, vector, examples)
        return quote_id

    def remove(self, quote_id: int) -> None:
        """Save a removal; once this returns, it survives a crash."""
        self._append((json.dumps({"removed": quote_id}) + "\n").encode("utf-8"))

    def hold(self) -> None:
        """Take the lock now, which the first change would take: SetLockedError when another process holds it,
        FolderNotWritableError when the folder cannot be written (the set is then served as it is). Only the lock
        file is made: the set's origin is recorded by its first change."""
        if self._lock_file is None:
            self._lock_file = self._take_lock()

    def close(self) -> None:
        """Close the log and let go of the lock; a later change takes it again, unless another process changed
        the set meanwhile."""
        for file in (self._log_file, self._lock_file):
            if file is not None:
                file.close()
        self._log_file = self._lock_file = None

    def _append(self, line: bytes) -> None:
        log_fd = self._claim().fileno()
        try:
            # At the end of the acknowledged changes, over whatever a failed write left there.
            if os.pwrite(log_fd, line, self._log_size) != len(line):
                raise OSError(errno.ENOSPC, "short write")
            os.fsync(log_fd)
        except OSError as error:
            # Cut off what the failed write left, so that the next change starts where it did.
            with contextlib.suppress(OSError):
                os.ftruncate(log_fd, self._log_size)
            raise _not_saved(error, f"{self.folder}: could not save the change ({error.strerror})") from None
        self._log_size += len(line)

    def _claim(self) -> BinaryIO:
        """The log, open for writing under the lock, which this process keeps from its first change on."""
        if self._log_file is not None:
            return self._log_file
        lock_file = self._lock_file if self._lock_file is not None else self._take_lock()
        self._lock_file = None  # kept again below, with the log
        log_path = self.folder / log_name(self._generation)
        if _snapshot_generation(self.folder) != self._generation or _has_more_changes(log_path, self._log_size):
            lock_file.close()
            raise StaleCopyError(
                f"{self.folder}: another process changed these quotes since they were loaded; restart to load them"
            )
        try:
            if self._origin is not None and not (self.folder / ORIGIN_FILE).exists():
                write_json_atomic(self.folder / ORIGIN_FILE, asdict(self._origin))
            log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT, 0o644)
        except (OSError, InputError) as error:
            lock_file.close()
            # write_json_atomic's InputError keeps the OSError it stands for as its context: the cause.
            cause = error if isinstance(error, OSError) else error.__context__
            raise _not_saved(cause, f"{self.folder}: cannot save quote changes here ({error})") from None
        self._log_file = os.fdopen(log_fd, "wb", buffering=0)
        fsync_path(self.folder)
        self._lock_file = lock_file
        return self._log_file

    def _take_lock(self) -> BinaryIO:
        """The lock file, locked by this process; made with its folder if need be."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            lock_file = (self.folder / LOCK_FILE).open("ab")
        except OSError as error:
            raise _not_saved(error, f"{self.folder}: cannot save quote changes here ({error.strerror})") from None
        if not _try_lock(lock_file.fileno()):
            lock_file.close()
            raise SetLockedError(self.folder)
        return lock_file


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _snapshot_generation(folder: Path) -> int:
    header = _read_header(folder / SNAPSHOT_FILE)
    return 0 if header is None else header["generation"]


def _has_more_changes(log_path: Path, known_size: int) -> bool:
    """Whether the log holds less than `known_size` bytes or a complete line after them."""
    try:
        size = log_path.stat().st_size
    except FileNotFoundError:
        return known_size > 0
    if size < known_size:
        return True
    with log_path.open("rb") as handle:
        handle.seek(known_size)
        return b"\n" in handle.read()


def _legacy_present(folder: Path) -> bool:
    return any((folder / name).exists() for name in LEGACY_FILES)


def _read_store(folder: Path, base: StoredQuotes) -> tuple[StoredQuotes, int, int, int]:
    """The saved set, its generation, and the bytes and number of complete lines in its log. Read again when
    another process compacts meanwhile (the log read would then be the deleted one of the old generation)."""
    while True:
        snapshot = _read_snapshot(folder / SNAPSHOT_FILE, base)
        if snapshot is None:
            replay, generation = _Replay(_read_legacy(folder) or base), 0
        else:
            replay, generation = snapshot
        log_path = folder / log_name(generation)
        log_size = changes = 0
        for number, raw, end in _complete_lines(log_path):
            replay.apply(_parse(raw, log_path, number), log_path, number)
            log_size, changes = end, number
        if _snapshot_generation(folder) == generation:
            return replay.result(), generation, log_size, changes


def _delete_leftovers(folder: Path, generation: int) -> None:
    """Temporary files of an interrupted compaction, and logs of older generations already in the snapshot."""
    current = log_name(generation)
    for path in folder.iterdir():
        stale_log = path.name.startswith("changes.") and path.name != current
        if path.name.endswith(TEMPORARY_SUFFIX) or stale_log:
            path.unlink()


def _compact(folder: Path, quotes: StoredQuotes, generation: int) -> int:
    """Write the whole set as the next generation's snapshot, then delete what it replaces; return the new
    generation."""
    new = generation + 1
    header = {
        "format": STORE_FORMAT,
        "version": STORE_VERSION,
        "generation": new,
        "next_id": quotes.next_id,
        "dim": quotes.vectors.shape[1],
    }
    temporary = folder / (SNAPSHOT_FILE + TEMPORARY_SUFFIX)
    with temporary.open("wb") as handle:
        handle.write((json.dumps(header) + "\n").encode("utf-8"))
        for (quote_id, record), vector in zip(quotes.records.items(), quotes.vectors):
            handle.write(quote_line(quote_id, record, vector, quotes.examples.get(quote_id)))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, folder / SNAPSHOT_FILE)
    fsync_path(folder)
    (folder / log_name(generation)).unlink(missing_ok=True)
    for name in LEGACY_FILES:
        (folder / name).unlink(missing_ok=True)
    return new
