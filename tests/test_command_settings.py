"""One configuration system: `quoter serve` (and serve.py), `quoter batch` and `quoter evaluate` take `--config
FILE.yaml` and `--set key=value` through the loader `quoter train` uses, with the same one-line errors; the
precedence is defaults < config file < --set < the options that name a setting."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

import quoter.cli.serve_commands as serve_commands
import quoter.serving.http.app as serving_app
from quoter.cli import app, main
from quoter.encoders.backend.runtime_config import ContextRuntime
from quoter.errors import QuoterError
from quoter.evaluation.settings import EvaluateConfig
from quoter.languages import Language
from quoter.serving.http.server_limits import ServerLimits
from quoter.serving.live.index_config import IndexConfig
from quoter.serving.micro_batching import BatchingConfig
from quoter.serving.settings import ServeConfig
from quoter.settings import load_settings
from tests.serving_fixtures import tiny_bundle

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def english_bundle(tmp_path):
    tiny_bundle(tmp_path / "en", Language.EN).save(tmp_path / "bundle-en")
    return f"en={tmp_path / 'bundle-en'}"


@pytest.fixture
def hosted(monkeypatch):
    """What `quoter serve` hands the app (its recommenders and app config) and the threads it sets."""
    seen = {}

    def create_app(recommenders, config):
        seen.update(recommenders=recommenders, app_config=config)
        return original(recommenders, config)

    original = serving_app.create_app
    monkeypatch.setattr(serving_app, "create_app", create_app)
    monkeypatch.setattr(serve_commands, "set_threads", lambda threads: seen.update(threads=threads))
    return seen


def test_a_serve_config_with_overrides_reaches_the_server(served, hosted, english_bundle, tmp_path):
    (tmp_path / "shared.yaml").write_text(
        "runtime: torch\nport: 9001\nthreads: 3\nbatching:\n  max_batch: 8\n  max_wait_ms: 5\n"
        "limits:\n  keep_alive_s: 30\n  max_body_bytes: 100\nindex:\n  nprobe: 4\n",
        encoding="utf-8",
    )
    (tmp_path / "server.yaml").write_text("base: shared.yaml\nport: 9002\nhost: 0.0.0.0\n", encoding="utf-8")
    result, calls = served(
        "--bundle", english_bundle, "--config", tmp_path / "server.yaml",
        "--set", "batching.max_batch=4", "--set", "port=9003", "--set", "threads=2", "--threads", 1,
        env={"QUOTER_API_KEY": "k"},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    # port: the file 9002 (over its base's 9001), then --set 9003; threads: --threads over --set over the file
    assert (calls["host"], calls["port"], hosted["threads"]) == ("0.0.0.0", 9003, 1)
    (recommender,) = hosted["recommenders"]
    assert recommender.config.runtime is ContextRuntime.TORCH
    assert recommender.config.batching == BatchingConfig(max_batch=4, max_wait_ms=5.0)
    assert recommender.config.index == IndexConfig(nprobe=4)
    limits = hosted["app_config"].limits
    # allowed_hosts follows the configured host: 0.0.0.0 answers any Host
    assert limits == ServerLimits(max_body_bytes=100, allowed_hosts=("*",), keep_alive_s=30)
    assert calls["options"]["timeout_keep_alive"] == 30
    with TestClient(calls["app"], base_url="http://quoter.example") as client:
        assert client.post("/recommend", json={"left": "the cat " * 20}).status_code == 413


def test_serve_options_keep_working_and_name_their_settings(served, hosted, english_bundle, tmp_path):
    config = tmp_path / "server.yaml"
    config.write_text("runtime: torch\nlimits:\n  allowed_hosts: [a.example]\n  keep_alive_s: 30\n", "utf-8")
    result, calls = served(
        "--bundle", english_bundle, "--config", config, "--allowed-host", "b.example", "--max-batch", 2,
        "--max-wait-ms", 0.5, "--keep-alive", 20, "--index", "ivf",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    (recommender,) = hosted["recommenders"]
    assert recommender.config.batching == BatchingConfig(max_batch=2, max_wait_ms=0.5)
    assert recommender.config.index.kind.value == "ivf"
    assert hosted["app_config"].limits.allowed_hosts == ("b.example",)
    assert calls["options"]["timeout_keep_alive"] == 20
    # Without a config: the defaults, each written once in ServeConfig.
    result, calls = served("--bundle", english_bundle, "--runtime", "torch")
    assert result.exit_code == 0, result.output
    default = ServeConfig()
    assert (calls["host"], calls["port"], hosted["threads"]) == (default.host, default.port, default.threads)
    assert hosted["recommenders"][0].config.batching == default.batching
    assert hosted["app_config"].limits == default.limits
    help_text = " ".join(run("-m", "quoter", "serve", "--help").stdout.split())
    assert "(limits.max_queued_contexts). [default: 512]" in help_text
    assert "(batching.max_batch). [default: 32]" in help_text


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=REPO)


def in_process(monkeypatch, capsys, *args) -> tuple[int, str, str]:
    """Run `quoter ARGS` in this process as a user would; return the exit status, stdout and stderr."""
    monkeypatch.setattr(sys, "argv", ["quoter", *map(str, args)])
    with pytest.raises(SystemExit) as stopped:
        main()
    captured = capsys.readouterr()
    return stopped.value.code, captured.out, captured.err


def known(cls: type) -> str:
    """The settings of a section, as an unknown key's error lists them."""
    return ", ".join(field.name for field in dataclasses.fields(cls))


@pytest.mark.parametrize(
    ("args", "config", "message"),
    [
        (["serve", "--set", "batching.max_wait=3"], None, "batching.max_wait: unknown setting; known in this "
         f"section: {known(BatchingConfig)}"),
        (["serve"], "prot: 80\n", f"prot: unknown setting; known in this section: {known(ServeConfig)}"),
        (["serve", "--set", "port=eighty"], None, "port: expected an integer, got 'eighty'"),
        (["serve"], "limits:\n  keep_alive_s: long\n", "limits.keep_alive_s: expected an integer, got 'long'"),
        (["serve", "--set", "port=0"], None, "port: must be from 1 to 65535, got 0"),
        (["serve", "--set", "runtime=gpu"], None, "runtime: expected one of auto, torch, onnx, onnx-int8, got 'gpu'"),
        (["serve", "--set", "threads"], None, "expected key=value (e.g. batching.max_batch=16), got 'threads'"),
        (["batch", "--input", "in.jsonl", "--output", "out.jsonl", "--set", "batch.k=ten"], None,
         "batch.k: expected an integer, got 'ten'"),
        (["evaluate"], "methd: bm25\n", f"methd: unknown setting; known in this section: {known(EvaluateConfig)}"),
        (["evaluate", "--set", "batch_size=many"], None, "batch_size: expected an integer, got 'many'"),
        (["evaluate", "--set", "lexical.k1=high"], None, "lexical.k1: expected a number, got 'high'"),
        (["evaluate"], "split: train\n", "split: expected one of test, valid, got 'train'"),
        (["evaluate", "--set", "method=magic"], None, "method: unknown method 'magic'; known methods: bm25, crm"),
    ],
)  # fmt: skip
def test_a_bad_setting_is_one_line_naming_it(monkeypatch, capsys, tmp_path, args, config, message):
    if config is not None:
        (tmp_path / "bad.yaml").write_text(config, encoding="utf-8")
        args = [*args, "--config", tmp_path / "bad.yaml"]
    monkeypatch.chdir(tmp_path)
    status, out, err = in_process(monkeypatch, capsys, *args)
    assert status == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith(f"error: {message}"), err


def test_serve_py_and_evaluate_report_a_bad_config_in_one_line_with_status_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("batching:\n  max_batch: many\n", encoding="utf-8")
    for result in (run("serve.py", "--config", str(bad)), run("-m", "quoter", "serve", "--config", str(bad))):
        assert result.returncode == 2
        assert result.stderr.strip().splitlines() == ["error: batching.max_batch: expected an integer, got 'many'"]
    result = run("-m", "quoter", "evaluate", "--set", "left_only=maybe")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == ["error: left_only: expected true or false, got 'maybe'"]


def evaluated(monkeypatch, capsys, tmp_path, name: str, *args) -> dict:
    out = tmp_path / f"{name}.json"
    status, _, err = in_process(monkeypatch, capsys, "evaluate", *args, "--out", out)
    assert status == 0, err
    return json.loads(out.read_text(encoding="utf-8"))


def test_evaluate_with_a_config_equals_the_same_options(monkeypatch, capsys, tmp_path):
    config = tmp_path / "crm.yaml"
    config.write_text("method: crm\ncrm_aggregate: sum\nsplit: valid\nleft_only: true\nlexical:\n  k1: 1.2\n", "utf-8")
    flags = ["--method", "crm", "--crm-aggregate", "sum", "--split", "valid", "--left-only", "--set", "lexical.k1=1.2"]
    by_flags = evaluated(monkeypatch, capsys, tmp_path, "flags", *flags)
    by_config = evaluated(monkeypatch, capsys, tmp_path, "config", "--config", config)
    by_sets = evaluated(
        monkeypatch, capsys, tmp_path, "sets",
        "--set", "method=crm", "--set", "crm_aggregate=sum", "--set", "split=valid", "--set", "left_only=true",
        "--set", "lexical.k1=1.2",
    )  # fmt: skip
    assert by_config == by_flags == by_sets
    assert (by_config["method"], by_config["split"]) == ("crm", "valid")
    default = evaluated(monkeypatch, capsys, tmp_path, "default")
    assert (default["method"], default["split"]) == ("bm25", "test") and default != by_config
    # --set and the options override the config file: here back to the defaults.
    overridden = evaluated(
        monkeypatch, capsys, tmp_path, "overridden", "--config", config, "--method", "bm25", "--split", "test",
        "--set", "left_only=false", "--set", "lexical.k1=1.5", "--set", "crm_aggregate=max",
    )  # fmt: skip
    assert overridden == default


def test_lists_and_tuples_are_typed_item_by_item(tmp_path):
    config = tmp_path / "s.yaml"
    config.write_text("limits:\n  allowed_hosts: [a.example, 7]\n", encoding="utf-8")
    assert load_settings(ServeConfig, config).limits.allowed_hosts == ("a.example", "7")
    config.write_text("limits:\n  allowed_hosts: a.example\n", encoding="utf-8")
    with pytest.raises(QuoterError, match=r"^limits.allowed_hosts: expected a list, got 'a.example'$"):
        load_settings(ServeConfig, config)
    config.write_text("limits:\n  allowed_hosts: [[a]]\n", encoding="utf-8")
    with pytest.raises(QuoterError, match=r"^limits.allowed_hosts\[0\]: expected a string, got \['a'\]$"):
        load_settings(ServeConfig, config)


def test_a_batch_config_with_overrides_reaches_the_run(english_bundle, tmp_path, monkeypatch):
    bundle = english_bundle.split("=", 1)[1]
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps({"left": f"the cat {i}", "right": "mat"}) + "\n" for i in range(5)), "utf-8")
    threads = []
    monkeypatch.setattr(serve_commands, "set_threads", threads.append)
    config = tmp_path / "batch.yaml"
    config.write_text("runtime: torch\nthreads: 2\nbatch:\n  k: 2\n  chunk: 2\n", encoding="utf-8")

    def ranked(*args) -> list[int]:
        output = tmp_path / "out.jsonl"
        arguments = ["batch", "--bundle", bundle, "--input", source, "--output", output, *args]
        result = CliRunner().invoke(app, list(map(str, arguments)))
        assert result.exit_code == 0, result.output
        return [len(json.loads(line)["results"]) for line in output.read_text(encoding="utf-8").splitlines()]

    assert ranked("--config", config) == [2] * 5 and threads == [2]
    assert ranked("--config", config, "--set", "batch.k=3", "--threads", 1) == [3] * 5 and threads[-1] == 1
    assert ranked("--config", config, "--set", "batch.k=3", "--k", 4) == [4] * 5
