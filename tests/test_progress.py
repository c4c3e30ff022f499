"""Progress bars of long work: drawn when stderr is a terminal, silent when it is a file or a pipe."""

import io
import sys

from typer.testing import CliRunner

from quoter.batch.contexts import BatchContext
from quoter.batch.job import run_batch
from quoter.cli import app
from quoter.datasets.mining import BuildConfig, build_dataset
from quoter.encoders import quote_encoder
from quoter.encoders.configs import QuoteEncoderConfig
from quoter.encoders.quote_encoder import QuoteEncoder
from quoter.languages import Language
from quoter.progress import progress_bar
from quoter.ranking import Query
from quoter.serving.recommender import Recommender
from tests.encoder_fixtures import tiny_model, tiny_tokenizer
from tests.serving_fixtures import tiny_bundle

QUOTE = "Look before you leap."


class Terminal(io.StringIO):
    """Captures what is written, and says it is a terminal."""

    def isatty(self) -> bool:
        return True


def stderr_into(monkeypatch, stream: io.StringIO) -> io.StringIO:
    """Make `stream` stderr; called in the test itself, since pytest's capture sets stderr again after fixtures."""
    monkeypatch.setattr(sys, "stderr", stream)
    return stream


def count_to_three() -> None:
    for _ in progress_bar(range(3), desc="counting"):
        pass


def test_a_bar_is_drawn_on_a_terminal(monkeypatch):
    terminal = stderr_into(monkeypatch, Terminal())
    count_to_three()
    assert "counting: 100%" in terminal.getvalue() and "3/3" in terminal.getvalue()


def test_no_bar_when_stderr_is_not_a_terminal(monkeypatch):
    pipe = stderr_into(monkeypatch, io.StringIO())
    count_to_three()
    assert pipe.getvalue() == ""


def test_no_bar_when_turned_off_even_on_a_terminal(monkeypatch):
    terminal = stderr_into(monkeypatch, Terminal())
    for _ in progress_bar(range(3), enabled=False):
        pass
    assert terminal.getvalue() == ""


def test_encoding_a_large_quote_set_shows_a_bar_and_a_small_one_does_not(tmp_path, monkeypatch):
    tokenizer = tiny_tokenizer(tmp_path / "tokenizer")
    encoder = QuoteEncoder(tiny_model(tokenizer), tokenizer, QuoteEncoderConfig(alpha=0.0))
    monkeypatch.setattr(quote_encoder, "PROGRESS_MIN_QUOTES", 4)
    terminal = stderr_into(monkeypatch, Terminal())
    encoder.encode(["the cat"] * 3)
    assert terminal.getvalue() == ""
    encoder.encode(["the cat"] * 4)
    assert "encoding quotes: 100%" in terminal.getvalue() and "4/4" in terminal.getvalue()


def test_a_batch_run_shows_its_contexts(tmp_path, monkeypatch):
    recommender = Recommender(tiny_bundle(tmp_path))
    contexts = [BatchContext(line, None, Query("the cat", "on the mat")) for line in range(1, 6)]
    terminal = stderr_into(monkeypatch, Terminal())
    run_batch(recommender, contexts, tmp_path / "out.jsonl")
    assert "5/5" in terminal.getvalue()


def write_build_inputs(folder):
    """A quote list and three documents that quote it."""
    (folder / "quotes.tsv").write_text(f"quote\tsource\n{QUOTE}\t\n", encoding="utf-8")
    corpus = folder / "corpus"
    corpus.mkdir()
    for k in range(3):
        (corpus / f"d{k}.txt").write_text(f"Before it, document {k}. {QUOTE} After it.\n", encoding="utf-8")
    return folder / "quotes.tsv", corpus


def test_a_data_build_shows_its_corpus_search_on_a_terminal(tmp_path, monkeypatch):
    quotes, corpus = write_build_inputs(tmp_path)
    config = BuildConfig.for_language(
        Language.EN,
        quote_files=(quotes,),
        corpus_paths=(corpus,),
        out_dir=tmp_path / "out",
        min_occurrences=3,
        use_stanza=False,
    )
    terminal = stderr_into(monkeypatch, Terminal())
    build_dataset(config)
    assert "searching corpus: 100%" in terminal.getvalue()


def test_a_data_build_into_a_pipe_draws_no_bar(tmp_path):
    quotes, corpus = write_build_inputs(tmp_path)
    args = ["--lang", "en", "--quotes", quotes, "--corpus", corpus, "--out", tmp_path / "out", "--min-occurrences", 3]
    result = CliRunner().invoke(app, ["data", "build", "--no-stanza", *map(str, args)])
    assert result.exit_code == 0, result.output
    assert "searching corpus" not in result.output
