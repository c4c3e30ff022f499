"""The live quote set in a PostgreSQL database that every serving process shares (`--store postgresql://...`):
the set's source of truth, whose changes each process follows into its in-memory index.

    quoter_schema    (version)                    the layout's version, one row
    quoter_sets      (name, quotes, encoder,      one row per set (name: the language): the origin of its base
                      digest, next_id, version)   set (quote_store.StoreOrigin), the next free id, and the
                                                  number of changes made to it
    quoter_quotes    (set_name, id, quote,        every quote the set ever listed: the vector as little-endian
                      source, gloss, vector,      float32, the usage examples it was added with as JSON (each
                      examples, listed)           with its context vector in base64), and whether it is listed
    quoter_changes   (set_name, version, kind,    each change: 'add' or 'remove' of a quote, by set version
                      quote_id)

The first process to open a set seeds it with the base set (the bundle's quotes, ids = line numbers) in one
transaction; a set whose changes were made to another base is refused, as the file store refuses it. Each
change is one transaction: it takes the next version (and, for an add, the next id) from the set's row, which
makes the writers of the set wait for each other, saves the change, logs it and sends a notification on the
channel `quoter_changes` with the set's name; it is acknowledged once committed. Ids are never given twice, and
a unique index keeps a text from being listed twice even when two processes add it at once.

Each process keeps the version its set in memory has reached: a change it saves also brings in the changes
before it that other processes made, and a follower thread LISTENs and reads the changes after that version
when notified, and again after every reconnect. While the database cannot be reached, changes are refused
(StoreUnavailableError) and recommendations go on from memory; the follower retries with backoff and catches
up when the database is back. Messages and logs name the set, database, host and port, never the URL, which
may hold a password.

Every wait on the database is bounded by STORE_WAIT_S: connecting (connect_timeout), then a change's
statements and its commit together, and each catch-up. A database whose processes hang (stopped, swapping)
answers nothing, and neither TCP keepalives (the kernel still acknowledges) nor statement_timeout (the server
runs no timer) end that wait, so a watchdog shuts the connection's socket down when the time is up. No wait
happens under the in-memory set's read lock (see LiveQuotes), so recommendations and listings answer from memory
meanwhile.

A connection lost while COMMIT was on its way leaves the change's fate unknown to this process: it connects
again and looks whether the change was logged at its version. Made, the change is acknowledged as usual; not
made, it is refused as any lost change is; and when the database cannot say, the error is OutcomeUnknownError.
Retrying the same change is safe then: an add of a text that was listed meanwhile returns its id, and a
removal of a quote already removed says it is not listed.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.types.json import Jsonb

from quoter.bundle import Bundle
from quoter.errors import InputError, QuoterError
from quoter.quote_record import QuoteRecord
from quoter.quote_set import VECTOR_TYPE, QuoteSet, text_vector, vector_text
from quoter.ranking import Query
from quoter.serving.live.index_config import IndexConfig
from quoter.serving.live.live_quotes import (
    ListedElsewhereError,
    LiveQuotes,
    OutcomeUnknownError,
    QuoteChange,
    StoreUnavailableError,
    UnknownQuoteError,
    UsageLearning,
)
from quoter.serving.live.quote_store import StoredQuotes, StoreOrigin, UsageExamples

SCHEMA_VERSION = 1
CHANNEL = "quoter_changes"
# Taken while the tables are made and a set is seeded, so that processes starting at once do both once.
SETUP_LOCK = 0x71756F746572  # "quoter"
# How long connecting, a change's statements and commit, a catch-up, or finding out whether a change whose
# commit was cut off was made, may each wait for the database: a few times what a healthy one takes under load.
STORE_WAIT_S = 5.0
# What ends a wait on a database that went away without a word (a lost network, a closed server); one that hangs
# is ended by the watchdog of `bounded`.
CONNECTION = {
    "connect_timeout": int(STORE_WAIT_S),
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
    "options": "-c statement_timeout=10s",
}
FOLLOW_WAKE_S = 1.0  # how often the follower looks whether it should stop
FIRST_RETRY_S = 0.2
LAST_RETRY_S = 10.0
URL_FORM = "postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE"

SCHEMA = """
CREATE TABLE IF NOT EXISTS quoter_schema (version integer NOT NULL);
CREATE TABLE IF NOT EXISTS quoter_sets (
    name text PRIMARY KEY,
    quotes integer NOT NULL,
    encoder text NOT NULL,
    digest text NOT NULL,
    next_id bigint NOT NULL,
    version bigint NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS quoter_quotes (
    set_name text NOT NULL REFERENCES quoter_sets (name),
    id bigint NOT NULL,
    quote text NOT NULL,
    source text NOT NULL,
    gloss text NOT NULL,
    vector bytea NOT NULL,
    examples jsonb,
    listed boolean NOT NULL DEFAULT true,
    PRIMARY KEY (set_name, id)
);
-- A hash: a quote may be longer than an index entry can be.
CREATE UNIQUE INDEX IF NOT EXISTS quoter_listed_text ON quoter_quotes (set_name, md5(quote)) WHERE listed;
CREATE TABLE IF NOT EXISTS quoter_changes (
    set_name text NOT NULL REFERENCES quoter_sets (name),
    version bigint NOT NULL,
    kind text NOT NULL CHECK (kind IN ('add', 'remove')),
    quote_id bigint NOT NULL,
    PRIMARY KEY (set_name, version)
);
"""
INSERT_QUOTE = """
INSERT INTO quoter_quotes (set_name, id, quote, source, gloss, vector, examples) VALUES (%s, %s, %s, %s, %s, %s, %s)
"""
# The changes after a version, each added quote with what it was added with.
CHANGES_AFTER = """
SELECT c.version, c.quote_id, q.quote, q.source, q.gloss, q.vector, q.examples
FROM quoter_changes c LEFT JOIN quoter_quotes q ON c.kind = 'add' AND q.set_name = c.set_name AND q.id = c.quote_id
WHERE c.set_name = %s AND c.version > %s ORDER BY c.version
"""
# What the change log holds at a version: the change's kind, its quote and an added quote's text.
LOGGED_AT = """
SELECT c.kind, c.quote_id, q.quote
FROM quoter_changes c LEFT JOIN quoter_quotes q ON c.kind = 'add' AND q.set_name = c.set_name AND q.id = c.quote_id
WHERE c.set_name = %s AND c.version = %s
"""
log = logging.getLogger(__name__)


def describe(url: str, name: str) -> str:
    """Where a set lives, for messages and logs: its name, database, host and port, never the URL's password.
    A URL that is none is a QuoterError."""
    try:
        parts = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        raise QuoterError(f"the quote store is not a PostgreSQL URL ({URL_FORM})") from None
    database = parts.get("dbname") or parts.get("user", "")  # libpq's default: the user's name
    host, port = parts.get("host", "localhost"), parts.get("port", 5432)
    return f"quote set '{name}' in PostgreSQL database {database} on {host}:{port}"


def reason(error: psycopg.Error) -> str:
    """The first line of a database error: what failed, naming at most a host and port."""
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


@contextmanager
def bounded(connection: psycopg.Connection[Any], seconds: float) -> Iterator[None]:
    """Shut the connection's socket down if the block takes longer than `seconds`, so that a wait on a database
    that hangs ends in an OperationalError. A connection the watchdog cut is closed when the block ends, even
    one that finished just in time: the next use makes another."""
    fd = connection.fileno()
    fired = threading.Event()

    def cut() -> None:
        fired.set()
        _shut_down(fd)

    watchdog = threading.Timer(seconds, cut)
    watchdog.daemon = True
    watchdog.start()
    try:
        yield
    finally:
        watchdog.cancel()
        watchdog.join()  # a cut under way ends before the connection is used again
        if fired.is_set():
            connection.close()


def _shut_down(fd: int) -> None:
    """Shut the socket `fd` down both ways: whoever waits on it wakes to a closed connection. A copy of the
    descriptor is shut down, so that the connection's own is closed by its owner alone."""
    try:
        with socket.socket(fileno=os.dup(fd)) as copy:
            copy.shutdown(socket.SHUT_RDWR)
    except OSError:  # closed meanwhile: nothing waits on it
        pass


def examples_json(examples: UsageExamples | None) -> Jsonb | None:
    """Usage examples as the JSON they are kept as: [{"left", "right", "vector"}, ...]."""
    if examples is None:
        return None
    return Jsonb(
        [
            {"left": context.left, "right": context.right, "vector": vector_text(row)}
            for context, row in zip(examples.contexts, examples.vectors)
        ]
    )


def json_examples(items: list[dict[str, Any]] | None) -> UsageExamples | None:
    """`examples_json`'s output read back."""
    if items is None:
        return None
    contexts = tuple(Query(item["left"], item["right"]) for item in items)
    return UsageExamples(contexts, np.stack([text_vector(item["vector"]) for item in items]))


def quote_change(row: tuple[Any, ...]) -> QuoteChange:
    """A change read by CHANGES_AFTER."""
    _, quote_id, text, source, gloss, vector, examples = row
    if text is None:
        return QuoteChange(quote_id)
    return QuoteChange(
        quote_id, QuoteRecord(text, source, gloss), np.frombuffer(vector, VECTOR_TYPE), json_examples(examples)
    )


@dataclass(frozen=True)
class LoggedChange:
    """A change as the change log holds it: its version of the set, its kind ('add' or 'remove'), its quote, and an
    added quote's text (which tells this process's add from another's that took the same version and id after it
    was rolled back)."""

    version: int
    kind: str
    quote_id: int
    text: str | None = None


class PostgresStore:
    """The changes of one live quote set in PostgreSQL (see the module's docstring); open it with
    `PostgresStore.open`, and let it `follow` the LiveQuotes made from what that read."""

    # Other processes change the set too: only the database knows whether a quote is listed.
    shared = True

    def __init__(self, url: str, name: str, version: int) -> None:
        self._url = url
        self._name = name
        self._where = describe(url, name)
        # The last change the set in memory has; read and set by the one change or catch-up under way (the
        # LiveQuotes' change lock).
        self._version = version
        self._connection: psycopg.Connection[Any] | None = None  # the changes', made again after it is lost
        # Set by the follower when it loses the database: the changes' connection is then lost too, unnoticed
        # until it is used.
        self._connection_lost = False
        self._live: LiveQuotes | None = None
        self._stop = threading.Event()
        self._follower: threading.Thread | None = None

    @classmethod
    def open(cls, url: str, name: str, base: StoredQuotes, origin: StoreOrigin) -> tuple[PostgresStore, StoredQuotes]:
        """The store of set `name` in the database at `url`, and the set as it is there; a set not there yet is
        seeded with `base` (the bundle's quotes), whose origin is `origin`. A database that cannot be reached, or
        a set whose changes were made to another base, is a QuoterError."""
        where = describe(url, name)
        try:
            with psycopg.connect(url, **CONNECTION) as connection, connection.transaction():
                connection.execute("SELECT pg_advisory_xact_lock(%s)", [SETUP_LOCK])
                _set_up(connection, where)
                _seed_or_check(connection, name, base, origin, where)
                quotes, version = _load(connection, name, base.vectors.shape[1])
        except psycopg.OperationalError as error:
            raise QuoterError(f"{where}: cannot reach the database ({reason(error)})") from None
        except psycopg.Error as error:
            raise QuoterError(f"{where}: cannot set up the quote set ({reason(error)})") from None
        return cls(url, name, version), quotes

    def follow(self, live: LiveQuotes) -> None:
        """Bring the changes other processes make into `live` (made from what `open` read), from now on."""
        self._live = live
        self._follower = threading.Thread(target=self._follow, name=f"follow {self._name}", daemon=True)
        self._follower.start()

    def hold(self) -> None:
        """Nothing to hold: every process that serves the set may change it."""

    def add_new(self, record: QuoteRecord, vector: np.ndarray, examples: UsageExamples | None = None) -> int:
        """Save an added quote under the set's next id and return the id, once committed; a text another process
        listed meanwhile is a ListedElsewhereError (the set has caught up with it by then). Called under the
        LiveQuotes' change lock."""

        def add(connection: psycopg.Connection[Any]) -> LoggedChange:
            row = connection.execute(
                "UPDATE quoter_sets SET next_id = next_id + 1, version = version + 1 WHERE name = %s "
                "RETURNING next_id - 1, version",
                [self._name],
            ).fetchone()
            assert row is not None
            quote_id, version = row
            self._catch_up(connection)
            values = [self._name, quote_id, record.text, record.source, record.gloss]
            connection.execute(INSERT_QUOTE, [*values, _vector_bytes(vector), examples_json(examples)])
            self._log_change(connection, version, "add", quote_id)
            return LoggedChange(version, "add", quote_id, record.text)

        try:
            made = self._change(add)
        except psycopg.errors.UniqueViolation:
            # Listed by a change the catch-up brought in: the writers of a set wait for each other.
            raise ListedElsewhereError("another process listed this text meanwhile") from None
        self._version = made.version
        return made.quote_id

    def remove(self, quote_id: int) -> None:
        """Save a removal, once committed; a quote not listed in the database (removed by another process, or
        never added) is an UnknownQuoteError, and one another process added is removed, the set in memory having
        caught up with it. Called under the LiveQuotes' change lock."""

        def remove(connection: psycopg.Connection[Any]) -> LoggedChange:
            row = connection.execute(
                "UPDATE quoter_sets SET version = version + 1 WHERE name = %s RETURNING version", [self._name]
            ).fetchone()
            assert row is not None
            self._catch_up(connection)
            removed = connection.execute(
                "UPDATE quoter_quotes SET listed = false WHERE set_name = %s AND id = %s AND listed",
                [self._name, quote_id],
            ).rowcount
            if not removed:  # the transaction is rolled back
                raise UnknownQuoteError("no quote has this id")
            self._log_change(connection, row[0], "remove", quote_id)
            return LoggedChange(row[0], "remove", quote_id)

        self._version = self._change(remove).version

    def close(self) -> None:
        """Stop following and close the connection; a later change connects again."""
        self._stop.set()
        if self._follower is not None:
            self._follower.join()
        self._drop_connection()

    def _change(self, change: Callable[[psycopg.Connection[Any]], LoggedChange]) -> LoggedChange:
        """The change `change` makes and logs, run in one transaction. A database that cannot be reached, or
        that hangs past STORE_WAIT_S, is a StoreUnavailableError; a connection lost during the commit, one too,
        unless the change turns out to be made (see the module's docstring)."""
        committing: LoggedChange | None = None
        try:
            connection = self._connected()
            with bounded(connection, STORE_WAIT_S), connection.transaction():
                committing = change(connection)
            return committing
        except psycopg.OperationalError as error:
            self._drop_connection()
            if committing is not None and self._was_made(committing):
                return committing
            raise StoreUnavailableError(
                f"{self._where}: the database cannot be reached, so the change was not saved ({reason(error)})"
            ) from None

    def _connected(self) -> psycopg.Connection[Any]:
        """The changes' connection, made again when it was lost."""
        if self._connection is None or self._connection.closed or self._connection_lost:
            self._drop_connection()
            self._connection_lost = False
            self._connection = psycopg.connect(self._url, **CONNECTION)
        return self._connection

    def _was_made(self, change: LoggedChange) -> bool:
        """Whether a change whose commit was cut off was made, asked over a new connection; an
        OutcomeUnknownError when the database cannot say within STORE_WAIT_S."""
        try:
            with psycopg.connect(self._url, autocommit=True, **CONNECTION) as connection:
                with bounded(connection, STORE_WAIT_S):
                    row = connection.execute(LOGGED_AT, [self._name, change.version]).fetchone()
        except psycopg.OperationalError as error:
            raise OutcomeUnknownError(
                f"{self._where}: the connection was lost while the change was committed, and the database cannot "
                f"be asked whether it was made ({reason(error)})"
            ) from None
        return row is not None and LoggedChange(change.version, *row) == change

    def _drop_connection(self) -> None:
        if self._connection is not None:
            self._connection.close()
        self._connection = None

    def _log_change(self, connection: psycopg.Connection[Any], version: int, kind: str, quote_id: int) -> None:
        """Log a change made in this transaction, and tell the followers once it is committed."""
        connection.execute("INSERT INTO quoter_changes VALUES (%s, %s, %s, %s)", [self._name, version, kind, quote_id])
        connection.execute("SELECT pg_notify(%s, %s)", [CHANNEL, self._name])

    def _catch_up(self, connection: psycopg.Connection[Any]) -> None:
        """Bring the changes after the set's version into memory (a change made here comes in after them)."""
        assert self._live is not None

        def changes() -> list[QuoteChange]:
            rows = connection.execute(CHANGES_AFTER, [self._name, self._version]).fetchall()
            if rows:
                self._version = rows[-1][0]
            return [quote_change(row) for row in rows]

        self._live.catch_up(changes)

    def _follow(self) -> None:
        """Listen for the set's changes and bring them in, reconnecting with backoff while the database is away."""
        delay = FIRST_RETRY_S
        lost = False
        while not self._stop.is_set():
            try:
                with psycopg.connect(self._url, autocommit=True, **CONNECTION) as connection:
                    with bounded(connection, STORE_WAIT_S):
                        connection.execute(f"LISTEN {CHANNEL}")
                        self._catch_up(connection)  # what changed while this process was not listening
                    if lost:
                        log.warning("%s: the database is back; changes made meanwhile are caught up", self._where)
                    lost, delay = False, FIRST_RETRY_S
                    while not self._stop.is_set():
                        # Read whole: the generator holds the connection until it ends.
                        heard = list(connection.notifies(timeout=FOLLOW_WAKE_S, stop_after=1))
                        if any(notice.payload == self._name for notice in heard):
                            with bounded(connection, STORE_WAIT_S):
                                self._catch_up(connection)
            except psycopg.Error as error:
                self._connection_lost = True
                if not lost:
                    message = "%s: lost the database, following again once it is back (%s)"
                    log.warning(message, self._where, reason(error))
                lost = True
                self._stop.wait(delay)
                delay = min(delay * 2, LAST_RETRY_S)


def _vector_bytes(vector: np.ndarray) -> bytes:
    return np.ascontiguousarray(vector, dtype=VECTOR_TYPE).tobytes()


def _set_up(connection: psycopg.Connection[Any], where: str) -> None:
    """Make the tables if they are not there; refuse a layout of another version."""
    connection.execute(SCHEMA)
    row = connection.execute("SELECT version FROM quoter_schema").fetchone()
    if row is None:
        connection.execute("INSERT INTO quoter_schema VALUES (%s)", [SCHEMA_VERSION])
    elif row[0] != SCHEMA_VERSION:
        raise InputError(f"the database holds quote sets of layout version {row[0]}, which is not supported", where)


def _seed_or_check(
    connection: psycopg.Connection[Any], name: str, base: StoredQuotes, origin: StoreOrigin, where: str
) -> None:
    """Seed set `name` with `base` if it is not there; else refuse it if its changes were made to another base."""
    row = connection.execute("SELECT quotes, encoder, digest FROM quoter_sets WHERE name = %s", [name]).fetchone()
    if row is None:
        connection.execute(
            "INSERT INTO quoter_sets (name, quotes, encoder, digest, next_id) VALUES (%s, %s, %s, %s, %s)",
            [name, origin.quotes, origin.encoder, origin.digest, base.next_id],
        )
        with connection.cursor() as cursor:
            cursor.executemany(
                INSERT_QUOTE,
                [
                    [name, quote_id, record.text, record.source, record.gloss, _vector_bytes(vector)]
                    + [examples_json(base.examples.get(quote_id))]
                    for (quote_id, record), vector in zip(base.records.items(), base.vectors)
                ],
            )
        return
    saved = StoreOrigin(*row)
    if saved != origin:
        raise InputError(
            f"holds quote changes made to another quote set ({saved.describe()}), not to the one served now "
            f"({origin.describe()}): serve the set they were made to, or give this one another database",
            where,
        )


def _load(connection: psycopg.Connection[Any], name: str, dim: int) -> tuple[StoredQuotes, int]:
    """The listed quotes of set `name` (vectors of size `dim`) and its version, as of one moment."""
    # FOR SHARE: a change in progress is waited for, and none starts until the quotes are read.
    row = connection.execute("SELECT next_id, version FROM quoter_sets WHERE name = %s FOR SHARE", [name]).fetchone()
    assert row is not None
    next_id, version = row
    records, vectors, examples = {}, [], {}
    for quote_id, text, source, gloss, vector, used in connection.execute(
        "SELECT id, quote, source, gloss, vector, examples FROM quoter_quotes WHERE set_name = %s AND listed "
        "ORDER BY id",
        [name],
    ):
        records[quote_id] = QuoteRecord(text, source, gloss)
        vectors.append(np.frombuffer(vector, VECTOR_TYPE))
        if used is not None:
            examples[quote_id] = json_examples(used)
    stacked = np.stack(vectors) if vectors else np.zeros((0, dim), VECTOR_TYPE)
    return StoredQuotes(records, stacked, next_id, examples), version


def shared_quotes(
    url: str,
    bundle: Bundle,
    config: IndexConfig = IndexConfig(),
    quotes: QuoteSet | None = None,
    usage: UsageLearning | None = None,
) -> LiveQuotes:
    """The live set of the bundle's language in the database at `url`, following the changes other processes
    make to it; seeded with `quotes` (a set the bundle's quote encoder made; None: the bundle's own) when it is not
    there yet. `usage`: how added quotes learn from their usage examples (see LiveQuotes.from_bundle)."""
    base = StoredQuotes.of_set(bundle.quote_set() if quotes is None else quotes)
    origin = StoreOrigin.of(base, bundle.quote_encoder.identity)
    store, loaded = PostgresStore.open(url, bundle.language.value, base, origin)
    live = LiveQuotes.of(loaded, bundle.quote_encoder, config, store, usage)
    store.follow(live)
    return live
