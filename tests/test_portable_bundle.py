"""A trained bundle carries everything it needs: copied to another machine's folder, made read-only and used from
anywhere, it loads, evaluates and serves exactly as where it was trained."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from pathlib import Path

import numpy as np
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from quoter.bundle import Bundle
from quoter.cli import app
from quoter.hybrid_bundle import bundle_ranker
from quoter.ranking import Query
from quoter.training.pipeline import train
from tests.serving_fixtures import LOOPBACK_URL
from tests.training_fixtures import tiny_config

# An English word reaches the Chinese word-sememe file through CC-CEDICT; both are named by paths relative to
# the folder training runs in, as the offline configs name ../shared/data.
SEMEME_FILE = "猫\nanimal|动物 pet|宠物\n狗\nanimal|动物 guard|守卫\n家\nplace|处所 family|家庭\n"
CEDICT_FILE = "貓 猫 [mao1] /cat/\n狗 狗 [gou3] /dog/\n家 家 [jia1] /home/\n"
QUERIES = [Query("the cat", "a ."), Query("dog", ""), Query(", home", "the")]


def _tree(folder: Path) -> dict[str, str]:
    """Every file under `folder` with a hash of its bytes."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*") if p.is_file()
    }


def _make_read_only(folder: Path) -> None:
    for path in [folder, *folder.rglob("*")]:
        path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def _evaluate(bundle: Path, data: Path, out: Path) -> dict:
    result = CliRunner().invoke(
        app, ["evaluate", "--method", "bundle", "--bundle", str(bundle), "--data", str(data), "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text(encoding="utf-8"))


def test_a_trained_bundle_copied_read_only_and_used_elsewhere_ranks_the_same(tmp_path, monkeypatch, served):
    training = tmp_path / "training"
    training.mkdir()
    (training / "sememes.txt").write_text(SEMEME_FILE, encoding="utf-8")
    (training / "cedict.txt").write_text(CEDICT_FILE, encoding="utf-8")
    monkeypatch.chdir(training)
    settings = {"sememes.source": "sememes.txt", "sememes.cedict": "cedict.txt", "sememes.alpha": "1.0"}
    config = tiny_config(tmp_path, **settings, **{"joint.max_steps": "3", "retrain.enabled": "false"})
    trained = train(config, log=lambda message: None)
    assert trained.quote_encoder.annotator is not None and trained.fusion is not None
    data = Path(config.data.path)
    metrics_there = _evaluate(Path(config.run.output), data, tmp_path / "there.json")

    copy = tmp_path / "server" / "bundle"
    shutil.copytree(config.run.output, copy)
    # Nothing the bundle was made from is left: not the lexicon, not the pretrained model, not the original.
    for made_from in (training, Path(config.model.name), Path(config.run.output)):
        shutil.rmtree(made_from)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    _make_read_only(copy)
    files = _tree(copy)
    try:
        loaded = Bundle.load(copy)
        assert loaded.quote_encoder.annotator is not None  # new quotes still get their sememes
        expected = bundle_ranker(trained).score(QUERIES)
        np.testing.assert_allclose(bundle_ranker(loaded).score(QUERIES), expected, rtol=1e-5, atol=1e-6)
        assert _evaluate(copy, data, tmp_path / "here.json") == metrics_there

        # Served read-only, with the live changes in a state folder.
        # With the float32 torch runtime, which evaluation used: int8 moves near-equal scores.
        result, calls = served("--bundle", f"en={copy}", "--state", tmp_path / "state", "--runtime", "torch")
        assert result.exit_code == 0, result.output
        with TestClient(calls["app"], base_url=LOOPBACK_URL) as client:
            for query, row in zip(QUERIES, expected):
                body = client.post("/recommend", json={"left": query.left, "right": query.right, "k": 10}).json()
                best_first = [trained.quotes[i].text for i in np.argsort(-row, kind="stable")]
                assert [r["quote"] for r in body["results"]] == best_first
            added = client.post("/quotes", json={"quote": "the cat ran home", "lang": "en"})
            assert added.status_code == 201
        assert (tmp_path / "state" / "en" / "quote_index").is_dir()
        # Nothing of the bundle was changed, and its quotes were not written to (root could, read-only or not).
        after = _tree(copy)
        assert {name: after.get(name) for name in files} == files and not (copy / "quote_index").exists()
    finally:
        for path in [copy, *copy.rglob("*")]:
            path.chmod(path.stat().st_mode | stat.S_IWUSR)
    assert os.getcwd() == str(elsewhere)
