"""An API key given empty is an error of one line, before any model loads: it used to turn authentication off
(QUOTER_API_KEY="" served every add and removal without a key)."""

import sys

import pytest

import quoter.cli
from quoter.cli.serve_commands import read_api_key
from quoter.errors import QuoterError


@pytest.mark.parametrize(
    ("args", "env"),
    [
        ([], {"QUOTER_API_KEY": ""}),
        ([], {"QUOTER_API_KEY": "  "}),
        (["--api-key", ""], None),
        (["--api-key", " \t"], None),
    ],
)
def test_an_empty_key_is_refused_in_one_line_with_status_2(args, env, monkeypatch, capsys):
    for name, value in (env or {}).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(sys, "argv", ["quoter", "serve", *args])
    with pytest.raises(SystemExit) as stopped:
        quoter.cli.main()
    assert stopped.value.code == 2
    assert capsys.readouterr().err == (
        "error: the API key is empty (--api-key or QUOTER_API_KEY); give a key, or unset it to serve without one\n"
    )


def test_an_empty_key_file_or_file_variable_is_refused(tmp_path, monkeypatch):
    empty = tmp_path / "key"
    empty.write_text(" \n", encoding="utf-8")
    with pytest.raises(QuoterError, match="the API key file is empty"):
        read_api_key(None, empty)
    monkeypatch.setenv("QUOTER_API_KEY_FILE", "")
    with pytest.raises(QuoterError, match="QUOTER_API_KEY_FILE is empty"):
        read_api_key(None, None)


def test_a_key_is_read_without_surrounding_white_space(tmp_path, monkeypatch):
    monkeypatch.delenv("QUOTER_API_KEY", raising=False)
    monkeypatch.delenv("QUOTER_API_KEY_FILE", raising=False)
    assert read_api_key(None, None) is None  # no key: changes open, as on a loopback server
    assert read_api_key(" s3cret\n", None) == "s3cret"
    key_file = tmp_path / "key"
    key_file.write_text("from-a-file\n", encoding="utf-8")
    assert read_api_key(None, key_file) == "from-a-file"
