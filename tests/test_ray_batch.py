"""`quoter batch --engine ray`: the same output as the single-process run, byte for byte, from shards that a
run that stopped resumes; another run's shards are refused. One local Ray cluster for the module."""

import json
import sys
import time
from dataclasses import replace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import ray
import torch
from typer.testing import CliRunner

from quoter.batch import ray_job
from quoter.batch.contexts import read_contexts
from quoter.batch.job import shard_folder
from quoter.batch.settings import BatchConfig, BatchEngineConfig
from quoter.bundle import Bundle
from quoter.cli import app
from quoter.errors import InputError, QuoterError
from quoter.serving.recommender import BUNDLE_AS_IS, Recommender
from quoter.serving.settings import EngineKind
from tests.serving_fixtures import tiny_bundle

# Ids of several JSON types, both contexts and left contexts only, of lengths that pad each step differently.
CONTEXTS = [
    {"left": f"the cat {'sat ' * (i % 7)}", "right": "on the mat" if i % 2 else "", "id": i if i % 3 else f"c{i}"}
    for i in range(50)
]
# Steps of 2 contexts, blocks of 4: 13 shards, the last of 2 contexts.
SMALL = ["--set", "batch.chunk=2", "--set", "engine.block=4"]
BLOCKS = 13
SETTLE_S = 1.0  # how long the shard folder must stay the same after a stopped run
SETTLE_CHECKS = 20


@pytest.fixture(scope="module", autouse=True)
def cluster():
    ray.init(num_cpus=2, include_dashboard=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def bundle_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ray-batch")
    tiny_bundle(folder).save(folder / "bundle")
    return folder / "bundle"


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    path = tmp_path_factory.mktemp("input") / "in.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in CONTEXTS), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def reference(bundle_folder, source, tmp_path_factory):
    """The single-process output of `source`, in the same steps."""
    output = tmp_path_factory.mktemp("reference") / "local.jsonl"
    result = batch("--bundle", bundle_folder, "--input", source, "--output", output, *SMALL)
    assert result.exit_code == 0, result.output
    return output.read_bytes()


def batch(*args):
    return CliRunner().invoke(app, ["batch", "--runtime", "torch", *map(str, args)])


def ray_batch(bundle_folder, source, output, *args):
    return batch("--bundle", bundle_folder, "--input", source, "--output", output, "--engine", "ray", *SMALL, *args)


def test_the_ray_output_is_the_single_process_output(bundle_folder, source, reference, tmp_path):
    output = tmp_path / "ray.jsonl"
    result = ray_batch(bundle_folder, source, output, "--workers", 2)
    assert result.exit_code == 0, result.output
    assert f"{output}: 50 contexts (50 ranked now)" in result.output
    assert output.read_bytes() == reference
    assert not shard_folder(output).exists()


class Interrupted(Exception):
    pass


class StoppingBar:
    """A progress bar that stops the run at its first update: when the first shard is written."""

    def __init__(self, **options):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exception):
        return False

    def update(self, count):
        raise Interrupted


def stopped_run(monkeypatch, bundle_folder, source, output):
    """Run the Ray batch of `source` and stop it once its first shard is written; return the shards done."""
    with monkeypatch.context() as patch:
        patch.setattr(ray_job, "progress_bar", StoppingBar)
        result = ray_batch(bundle_folder, source, output, "--workers", 2)
    assert isinstance(result.exception, Interrupted)
    # The module's cluster outlives the stopped run, so blocks already in its workers still land, whole: wait
    # until they have, as a run killed with its cluster would not need to.
    done: list[str] = []
    for _ in range(SETTLE_CHECKS):
        time.sleep(SETTLE_S)
        now = sorted(path.name for path in shard_folder(output).glob("*.jsonl"))
        if now == done:
            break
        done = now
    # The stopped run has shut its execution down: its workers gave their CPUs back.
    assert ray.available_resources().get("CPU") == ray.cluster_resources()["CPU"]
    return done


def test_a_stopped_run_resumes_to_the_same_output_ranking_only_the_missing_blocks(
    monkeypatch, bundle_folder, source, reference, tmp_path
):
    output = tmp_path / "ray.jsonl"
    done = stopped_run(monkeypatch, bundle_folder, source, output)
    assert 1 <= len(done) < BLOCKS and not output.exists()
    finished = sum(len((shard_folder(output) / name).read_text().splitlines()) for name in done)

    result = ray_batch(bundle_folder, source, output, "--workers", 2, "--resume")
    assert result.exit_code == 0, result.output
    assert f"({50 - finished} ranked now)" in result.output
    assert output.read_bytes() == reference
    assert not shard_folder(output).exists()


def test_resuming_another_runs_shards_is_refused_in_one_line(monkeypatch, bundle_folder, source, tmp_path):
    output = tmp_path / "ray.jsonl"
    stopped_run(monkeypatch, bundle_folder, source, output)
    shards = shard_folder(output)
    kept = {path.name: path.read_bytes() for path in shards.iterdir()}
    refused = ray_batch(bundle_folder, source, output, "--resume", "--k", 3)
    assert isinstance(refused.exception, InputError)
    assert str(refused.exception) == (
        f"{shards}: cannot resume: it holds the top 10 quotes per context, not 3 (--k); delete it or run without "
        "--resume"
    )
    assert {path.name: path.read_bytes() for path in shards.iterdir()} == kept and not output.exists()
    other_block = batch(
        "--bundle", bundle_folder, "--input", source, "--output", output, "--engine", "ray", "--resume",
        "--set", "batch.chunk=2", "--set", "engine.block=6",
    )  # fmt: skip
    assert "its shards hold 4 contexts each, not 6 (engine.block)" in str(other_block.exception)


def test_parquet_input_reads_as_its_json_lines_twin(bundle_folder, source, reference, tmp_path):
    # A Parquet column holds one type: the ids as strings.
    rows = [{**row, "id": str(row["id"])} for row in CONTEXTS]
    table = pa.table({name: [row[name] for row in rows] for name in ("left", "right", "id")})
    pq.write_table(table, tmp_path / "in.parquet")
    parquet, jsonl = read_contexts(tmp_path / "in.parquet"), read_contexts(source)
    assert [(c.line, c.query) for c in parquet] == [(c.line, c.query) for c in jsonl]
    assert [c.id for c in parquet] == [str(c.id) for c in jsonl]
    output = tmp_path / "ray.jsonl"
    assert ray_batch(bundle_folder, tmp_path / "in.parquet", output).exit_code == 0
    got = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
    want = [json.loads(line) for line in reference.decode("utf-8").splitlines()]
    assert got == [{**row, "id": str(row["id"])} for row in want]


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (pa.table({"text": ["a"]}), "bad.parquet: expected a column 'left' (and 'right', 'id'); found text"),
        (pa.table({"left": ["a", None]}), "bad.parquet:2 (field 'left'): expected a string"),
        (pa.table({"left": ["a"], "id": [[1, 2]]}), "bad.parquet:1 (field 'id'): expected a string or a number"),
    ],
)
def test_bad_parquet_input_names_file_row_and_field(tmp_path, table, message):
    pq.write_table(table, tmp_path / "bad.parquet")
    with pytest.raises(InputError) as error:
        read_contexts(tmp_path / "bad.parquet")
    assert str(error.value) == f"{tmp_path}/{message}"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--engine", "ray", "--set", "engine.block=10"], "engine.block: must be a multiple of batch.chunk (4), got"),
        (["--workers", "2"], "engine.workers: needs the ray engine (--engine ray)"),
        (["--engine", "ray", "--workers", "3", "--threads", "1"], "--workers 3 with --threads 1 need 3 CPUs; the Ray"),
    ],
)
def test_settings_the_run_cannot_use_are_refused_in_one_line(bundle_folder, source, tmp_path, args, message):
    output = tmp_path / "out.jsonl"
    refused = batch("--bundle", bundle_folder, "--input", source, "--output", output, "--set", "batch.chunk=4", *args)
    assert isinstance(refused.exception, QuoterError) and message in str(refused.exception)
    assert not output.exists()


def test_without_ray_the_ray_engine_says_how_to_install_it(monkeypatch, bundle_folder, source, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)  # what `import ray` meets where Ray is not installed
    refused = ray_batch(bundle_folder, source, tmp_path / "out.jsonl")
    assert str(refused.exception) == "--engine ray needs Ray: pip install 'quoter[scale]'"


def test_a_worker_that_takes_gpus_runs_its_context_encoder_on_one():
    cpu = BatchConfig()
    assert ray_job.worker_config(cpu) is cpu
    gpu = BatchConfig(engine=BatchEngineConfig(kind=EngineKind.RAY, gpus_per_worker=1.0))
    assert ray_job.worker_config(gpu).device == "cuda" and gpu.device == "cpu"


def test_the_cuda_device_moves_the_context_encoder_or_says_there_is_no_gpu(bundle_folder):
    config = replace(BUNDLE_AS_IS, device="cuda")
    if not torch.cuda.is_available():
        with pytest.raises(QuoterError, match="^device: cuda asked for, and no CUDA GPU is visible to this process$"):
            Recommender(Bundle.load(bundle_folder), config)
        return
    recommender = Recommender(Bundle.load(bundle_folder), config)
    assert recommender.runtime.name == "torch" and recommender.context_encoder.model.device.type == "cuda"


def test_a_device_neither_cpu_nor_cuda_is_refused_in_one_line():
    with pytest.raises(QuoterError, match="^device: expected cpu or cuda"):
        BatchConfig(device="tpu")
