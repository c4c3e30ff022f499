"""`quoter batch`: every context of a file ranked in input order, written atomically, resumable."""

import dataclasses
import json
import resource
import signal
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from quoter.batch.contexts import read_contexts
from quoter.batch.job import partial_path, run_batch
from quoter.batch.resume import run_record_path
from quoter.batch.settings import BatchOutputConfig
from quoter.bundle import Bundle
from quoter.cli import app
from quoter.errors import InputError, QuoterError
from quoter.ranking import Query
from quoter.serving import hosting
from quoter.serving.recommender import Recommender
from tests.serving_fixtures import tiny_bundle

CONTEXTS = [{"left": f"the cat {'sat ' * i}", "right": "on the mat" if i % 2 else "", "id": f"c{i}"} for i in range(11)]


@pytest.fixture(scope="module")
def bundle_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("batch")
    tiny_bundle(folder).save(folder / "bundle")
    return folder / "bundle"


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def batch(*args):
    # The torch runtime, as the Recommenders these tests compare with use (test_context_runtime covers the others).
    return CliRunner().invoke(app, ["batch", "--runtime", "torch", *map(str, args)])


def assert_same_output(got, want):
    assert [(g["line"], g.get("id"), [r["id"] for r in g["results"]]) for g in got] == [
        (w["line"], w.get("id"), [r["id"] for r in w["results"]]) for w in want
    ]
    for g, w in zip(got, want):
        assert [r["score"] for r in g["results"]] == pytest.approx([r["score"] for r in w["results"]], rel=1e-4)


def test_every_context_in_input_order(bundle_folder, tmp_path):
    source = write_jsonl(tmp_path / "in.jsonl", CONTEXTS)
    result = batch("--bundle", bundle_folder, "--input", source, "--output", tmp_path / "out.jsonl", "--k", 3)
    assert result.exit_code == 0, result.output
    rows = read_jsonl(tmp_path / "out.jsonl")
    assert [row["id"] for row in rows] == [c["id"] for c in CONTEXTS] and [row["line"] for row in rows] == list(
        range(1, 12)
    )
    recommender = Recommender(Bundle.load(bundle_folder))
    want = recommender.recommend([Query(CONTEXTS[4]["left"], CONTEXTS[4]["right"])], 3)[0]
    assert [r["id"] for r in rows[4]["results"]] == [q.id for q in want]
    assert rows[4]["results"][0].keys() == {"id", "quote", "source", "score", "probability"}
    assert not partial_path(tmp_path / "out.jsonl").exists()


def test_tsv_inputs_and_left_only(bundle_folder, tmp_path):
    two = tmp_path / "two.tsv"
    two.write_text("the cat\ton the mat\nthe dog\thome\n", encoding="utf-8")
    three = tmp_path / "three.txt"
    three.write_text("the cat\tQUOTE\ton the mat\nthe dog\tQUOTE\thome\n", encoding="utf-8")
    assert [c.query for c in read_contexts(two)] == [c.query for c in read_contexts(three)]
    assert batch("--bundle", bundle_folder, "--input", two, "--output", tmp_path / "a.jsonl").exit_code == 0
    assert batch("--bundle", bundle_folder, "--input", three, "--output", tmp_path / "b.jsonl").exit_code == 0
    assert read_jsonl(tmp_path / "a.jsonl") == read_jsonl(tmp_path / "b.jsonl")
    left_only = batch("--bundle", bundle_folder, "--input", two, "--output", tmp_path / "c.jsonl", "--left-only")
    assert left_only.exit_code == 0
    recommender = Recommender(Bundle.load(bundle_folder))
    want = recommender.recommend([Query("the cat")], 10)[0]
    got = read_jsonl(tmp_path / "c.jsonl")[0]["results"]
    assert [r["id"] for r in got] == [q.id for q in want]
    assert [r["score"] for r in got] == pytest.approx([q.score for q in want], rel=1e-4)


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("bad.jsonl", '{"left": "a"}\n{"left": "b"\n', "bad.jsonl:2: not valid JSON"),
        ("bad.jsonl", '{"left": "a"}\n["b"]\n', "bad.jsonl:2: expected a JSON object"),
        ("bad.jsonl", '{"left": "a", "right": 3}\n', "bad.jsonl:1 (field 'right'): expected a string"),
        ("bad.tsv", "a\tb\nonly left\n", "bad.tsv:2: expected left<TAB>right"),
        ("bad.tsv", "", "bad.tsv: the input file has no contexts"),
        # JSON can escape a lone surrogate, which is no text: the tokenizer would fail on it with a TypeError.
        ("bad.jsonl", '{"left": "a\\udc80b"}\n', "bad.jsonl:1 (field 'left'): character 2 is a lone surrogate"),
        # Beyond what Python's parser takes in: each was a traceback (RecursionError, ValueError).
        ("bad.jsonl", '{"left": "a"}\n' + "[" * 100_000 + "]" * 100_000, "bad.jsonl:2: JSON nested more than 100"),
        (
            "bad.jsonl",
            '{"left": "a", "id": ' + "7" * 5000 + "}",
            "bad.jsonl:1 (field 'id'): an integer of 5,000 digits",
        ),
        # Python's parser takes these in, and the output wrote them back: no JSON.
        ("bad.jsonl", '{"left": "a", "id": 1}\n{"left": "b", "id": NaN}\n', "bad.jsonl:2 (field 'id'): NaN and"),
        ("bad.jsonl", '{"left": "a", "id": Infinity}\n', "bad.jsonl:1 (field 'id'): NaN and infinities are not"),
        ("bad.jsonl", '{"left": "a", "id": {"n": [-Infinity]}}\n', "bad.jsonl:1 (field 'id'): NaN and infinities"),
        # A context that shows nothing was ranked all the same.
        (
            "bad.jsonl",
            '{"left": "a"}\n{"left": " ", "right": "\\u200b\\t"}\n',
            "bad.jsonl:2: the context shows nothing",
        ),
        ("bad.jsonl", '{"left": "\\u3000"}\n', "bad.jsonl:1: the context shows nothing on either side"),
        ("bad.tsv", "a\tb\n\u200b\t\u0301\n", "bad.tsv:2: the context shows nothing on either side"),
    ],
)
def test_bad_input_lines_name_file_and_line(tmp_path, name, content, message):
    (tmp_path / name).write_text(content, encoding="utf-8")
    with pytest.raises(InputError) as error:
        read_contexts(tmp_path / name)
    assert message in str(error.value) and str(error.value).startswith(str(tmp_path))


def test_with_left_only_the_left_context_must_show_something(tmp_path):
    source = write_jsonl(tmp_path / "in.jsonl", [CONTEXTS[0], {"left": " ", "right": "on the mat"}])
    assert [c.query.right for c in read_contexts(source)] == ["", "on the mat"]
    with pytest.raises(InputError) as error:
        read_contexts(source, left_only=True)
    assert str(error.value).startswith(f"{source}:2 (field 'left'): the left context shows nothing, and --left-only")


@pytest.mark.parametrize("id", [float("nan"), float("inf"), float("-inf")])
def test_a_parquet_id_that_is_no_json_number_is_refused(tmp_path, id):
    pa = pytest.importorskip("pyarrow")
    parquet = pytest.importorskip("pyarrow.parquet")
    parquet.write_table(pa.table({"left": ["a", "b"], "id": [1.5, id]}), tmp_path / "in.parquet")
    with pytest.raises(InputError) as error:
        read_contexts(tmp_path / "in.parquet")
    assert str(error.value) == f"{tmp_path}/in.parquet:2 (field 'id'): NaN and infinities are not JSON numbers"


def test_a_score_json_cannot_hold_stops_the_run_in_one_line(bundle_folder, tmp_path):
    recommender = Recommender(Bundle.load(bundle_folder))
    plain = recommender.recommend

    def scoring_nan(queries, k):
        return [[dataclasses.replace(q, score=float("nan")) for q in found] for found in plain(queries, k)]

    recommender.recommend = scoring_nan
    contexts = read_contexts(write_jsonl(tmp_path / "in.jsonl", CONTEXTS))
    with pytest.raises(QuoterError, match=r"^input line 1: the model scored a quote NaN or infinite, which JSON"):
        run_batch(recommender, contexts, tmp_path / "out.jsonl", progress=False)
    assert not (tmp_path / "out.jsonl").exists()


class Interrupted(Exception):
    pass


def interrupted_run(bundle_folder, source, output):
    """Run the batch of `source` in steps of 3 contexts and stop it in the third step."""
    recommender = Recommender(Bundle.load(bundle_folder))
    plain = recommender.recommend
    calls = []

    def failing(queries, k):
        calls.append(len(queries))
        if len(calls) == 3:
            raise Interrupted
        return plain(queries, k)

    recommender.recommend = failing
    with pytest.raises(Interrupted):
        run_batch(recommender, read_contexts(source), output, BatchOutputConfig(chunk=3), progress=False)


def test_resume_after_an_interruption_gives_the_uninterrupted_output(bundle_folder, tmp_path):
    source = write_jsonl(tmp_path / "in.jsonl", CONTEXTS)
    assert batch("--bundle", bundle_folder, "--input", source, "--output", tmp_path / "whole.jsonl").exit_code == 0
    output = tmp_path / "out.jsonl"
    interrupted_run(bundle_folder, source, output)
    partial = partial_path(output)
    assert not output.exists() and len(read_jsonl(partial)) == 6
    with partial.open("a", encoding="utf-8") as handle:
        handle.write('{"line": 7, "resu')  # the interruption cut the last line short

    result = batch("--bundle", bundle_folder, "--input", source, "--output", output, "--resume")
    assert result.exit_code == 0, result.output
    assert not partial.exists() and not run_record_path(partial).exists()
    assert_same_output(read_jsonl(output), read_jsonl(tmp_path / "whole.jsonl"))


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("other input", "it is the output of other contexts (another input file, or a changed one)"),
        ("--k", "it holds the top 10 quotes per context, not 3 (--k)"),
        ("--left-only", "it was ranked without --left-only"),
    ],
)
def test_resume_refuses_the_partial_output_of_another_run(bundle_folder, tmp_path, change, reason):
    source = write_jsonl(tmp_path / "in.jsonl", CONTEXTS)
    output = tmp_path / "out.jsonl"
    interrupted_run(bundle_folder, source, output)
    partial = partial_path(output)
    kept = partial.read_bytes()
    args = ["--bundle", bundle_folder, "--input", source, "--output", output, "--resume"]
    if change == "other input":
        args[3] = write_jsonl(tmp_path / "other.jsonl", [{**CONTEXTS[0], "left": "another cat"}, *CONTEXTS[1:]])
    else:
        args += ["--k", "3"] if change == "--k" else ["--left-only"]
    refused = batch(*args)
    assert isinstance(refused.exception, InputError)
    assert str(refused.exception) == f"{partial}: cannot resume: {reason}; delete it or run without --resume"
    assert partial.read_bytes() == kept and not output.exists()
    # Without --resume the partial output is replaced.
    assert batch(*[arg for arg in args if arg != "--resume"]).exit_code == 0
    assert not partial.exists() and not run_record_path(partial).exists()


@pytest.fixture
def no_model_loads(monkeypatch):
    """Fail the test if `quoter batch` loads a model: what is refused must be refused before that."""

    def loading(*args, **kwargs):
        pytest.fail("a model was loaded before the refusal")

    monkeypatch.setattr(hosting, "hosted_recommender", loading)
    monkeypatch.setattr(hosting, "default_recommenders", loading)


def _links_to_input(tmp_path, source):
    (tmp_path / "link.jsonl").symlink_to(source)
    return tmp_path / "link.jsonl"


def _hard_link_to_input(tmp_path, source):
    (tmp_path / "hard.jsonl").hardlink_to(source)
    return tmp_path / "hard.jsonl"


@pytest.mark.parametrize(
    ("input_name", "output", "message"),
    [
        ("in.jsonl", lambda tmp, source: tmp / "out", "out: is a folder; give --output a file name"),
        ("in.jsonl", lambda tmp, source: "", ".: is a folder; give --output a file name"),
        ("in.jsonl", lambda tmp, source: source, "in.jsonl: --output would overwrite the --input file"),
        ("in.jsonl", lambda tmp, source: tmp / "out" / ".." / "in.jsonl", "--output would overwrite the --input file"),
        ("in.jsonl", _links_to_input, "link.jsonl: --output would overwrite the --input file"),
        ("in.jsonl", _hard_link_to_input, "hard.jsonl: --output would overwrite the --input file"),
        # The output would grow in the input file, its OUTPUT.partial.
        ("in.jsonl.partial", lambda tmp, source: tmp / "in.jsonl", "in.jsonl.partial: --output would overwrite"),
        # As root, the permissions let anything be written there; nothing can be created, though.
        ("in.jsonl", lambda tmp, source: "/proc/quoter-out.jsonl", "cannot write --output here: /proc takes no new"),
        ("in.jsonl", lambda tmp, source: "/sys/quoter/out.jsonl", "cannot write --output here: /sys takes no new"),
        ("in.jsonl", lambda tmp, source: "/dev/null", "/dev/null: is not a regular file; give --output a file name"),
    ],
)
def test_an_output_that_cannot_be_written_or_would_overwrite_the_input_is_refused_before_any_model_loads(
    tmp_path, no_model_loads, input_name, output, message
):
    (tmp_path / "out").mkdir()
    source = write_jsonl(tmp_path / input_name, CONTEXTS)
    kept = source.read_bytes()
    refused = batch("--lang", "en", "--input", source, "--output", output(tmp_path, source))
    assert isinstance(refused.exception, InputError) and message in str(refused.exception)
    assert source.read_bytes() == kept


@pytest.mark.parametrize(
    ("rows", "args", "message"),
    [
        ([CONTEXTS[0], {"left": "", "right": " "}], [], "in.jsonl:2: the context shows nothing on either side"),
        ([{"left": "a", "id": 1}, {"left": "b", "id": float("nan")}], [], "in.jsonl:2 (field 'id'): NaN and"),
        # Far more quotes than anyone reads: a typo, which would fill the disk.
        (CONTEXTS, ["--k", "5000"], "batch.k: must be at most 1000, got 5000"),
    ],
)
def test_an_input_or_setting_the_output_cannot_hold_is_refused_before_any_model_loads(
    tmp_path, no_model_loads, rows, args, message
):
    source = write_jsonl(tmp_path / "in.jsonl", rows)
    refused = batch("--lang", "en", "--input", source, "--output", tmp_path / "out.jsonl", *args)
    assert isinstance(refused.exception, QuoterError) and message in str(refused.exception)
    assert "\n" not in str(refused.exception) and not (tmp_path / "out.jsonl").exists()


def test_the_model_is_given_by_one_of_bundle_and_lang(bundle_folder, tmp_path, no_model_loads):
    source = write_jsonl(tmp_path / "in.jsonl", CONTEXTS)
    neither = batch("--input", source, "--output", tmp_path / "out.jsonl")
    assert str(neither.exception) == "no model given: give --bundle DIR, or --lang LANG for the built-in default"
    both = batch("--bundle", bundle_folder, "--lang", "en", "--input", source, "--output", tmp_path / "out.jsonl")
    assert str(both.exception) == "--bundle and --lang exclude each other: give only one of them"


def limited_file_size(limit):
    """For a child process: files grow to `limit` bytes at most, and a write past it fails with EFBIG (the
    signal that would kill the process ignored, as Python does)."""

    def limit_files():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return limit_files


def test_a_full_disk_stops_the_batch_in_one_line_and_resume_finishes_it(bundle_folder, tmp_path):
    source = write_jsonl(tmp_path / "in.jsonl", CONTEXTS)
    output = tmp_path / "out.jsonl"
    args = [sys.executable, "-m", "quoter", "batch", "--runtime", "torch", "--bundle", str(bundle_folder)]
    args += ["--input", str(source), "--set", "batch.chunk=2"]
    stopped = subprocess.run(
        [*args, "--output", str(output)], capture_output=True, text=True, preexec_fn=limited_file_size(3000)
    )
    assert stopped.returncode == 2, stopped.stderr
    last = stopped.stderr.strip().splitlines()[-1]
    assert "Traceback" not in stopped.stderr and last.startswith(f"error: {partial_path(output)}: File too large;")
    assert "run the same command with --resume" in last
    partial = partial_path(output)
    assert not output.exists() and run_record_path(partial).is_file() and 0 < partial.stat().st_size <= 3000

    resumed = subprocess.run([*args, "--output", str(output), "--resume"], capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    assert batch("--bundle", bundle_folder, "--input", source, "--output", tmp_path / "whole.jsonl").exit_code == 0
    assert_same_output(read_jsonl(output), read_jsonl(tmp_path / "whole.jsonl"))
