"""A real PostgreSQL server for the tests of the shared quote store: one cluster per test session, made by
initdb in a temporary folder and listening on a free port of 127.0.0.1 (its unix socket in that folder), run
as the `postgres` user when the tests run as root (PostgreSQL refuses to run as root); and a fresh database
per test, so that no test sees another's quote sets. tests/run makes sure the server's programs are there
(Debian's `postgresql`)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import count
from pathlib import Path

import psycopg
import pytest

# Debian installs the server's programs here, one folder per major version, off PATH.
DEBIAN_VERSIONS = Path("/usr/lib/postgresql")
SERVER_USER = "postgres"
START_TIMEOUT_S = 60


def server_programs() -> Path | None:
    """The folder of initdb and pg_ctl: the one on PATH, else Debian's newest; None when there is none."""
    on_path = shutil.which("initdb")
    if on_path is not None:
        return Path(on_path).parent
    found = sorted(DEBIAN_VERSIONS.glob("*/bin/initdb"), key=lambda path: int(path.parent.parent.name))
    return found[-1].parent if found else None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class PostgresServer:
    """A PostgreSQL cluster in `folder` (data in folder/data, the socket and log beside it) on `port`."""

    def __init__(self, programs: Path, folder: Path, port: int) -> None:
        self.programs = programs
        self.folder = folder
        self.port = port
        self._databases = count()

    def url(self, database: str = "postgres") -> str:
        """The URL of one of its databases, as `--store` takes it."""
        return f"postgresql://{SERVER_USER}@127.0.0.1:{self.port}/{database}"

    def run(self, program: str, *arguments: str) -> None:
        """Run one of the server's programs as the user that owns the cluster."""
        command = [str(self.programs / program), *arguments]
        if os.geteuid() == 0:
            command = ["runuser", "-u", SERVER_USER, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=START_TIMEOUT_S)
        if done.returncode != 0:
            log = self.folder / "server.log"
            raise RuntimeError(f"{program} failed: {done.stderr}{log.read_text() if log.exists() else ''}")

    def start(self) -> None:
        """Start the server (again) and wait until it answers."""
        # fsync off: the tests kill clients, never the server, and a test session should not wait for the disk.
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        data, log = str(self.folder / "data"), str(self.folder / "server.log")
        self.run("pg_ctl", "start", "-w", "-D", data, "-l", log, "-o", options)

    def stop(self) -> None:
        """Stop the server as an operator's fast shutdown does: clients are disconnected."""
        self.run("pg_ctl", "stop", "-w", "-m", "fast", "-D", str(self.folder / "data"))

    def new_database(self) -> str:
        """The URL of a database made now, empty."""
        name = f"test_{next(self._databases)}"
        with psycopg.connect(self.url(), autocommit=True) as connection:
            connection.execute(f"CREATE DATABASE {name}")
        return self.url(name)


@contextmanager
def running_postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server started now in a temporary folder, stopped and deleted when the block ends (the
    tests' session server; benchmarks.scale_out starts one the same way)."""
    programs = server_programs()
    if programs is None:
        raise RuntimeError("no PostgreSQL server programs (initdb): install Debian's postgresql (tests/run does)")
    # Not under pytest's temporary folders: those are private to root, and the server runs as postgres.
    folder = Path(tempfile.mkdtemp(prefix="quoter-postgres-"))
    if os.geteuid() == 0:
        shutil.chown(folder, SERVER_USER)
    server = PostgresServer(programs, folder, free_port())
    try:
        server.run("initdb", "-D", str(folder / "data"), "-U", SERVER_USER, "-A", "trust", "-E", "UTF8", "--no-sync")
        server.start()
        yield server
        server.stop()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server for the session, stopped and deleted at its end."""
    with running_postgres() as server:
        yield server


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """The URL of a fresh database on the session's server."""
    return postgres_server.new_database()
