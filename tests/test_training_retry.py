"""A training run that stopped before its first checkpoint left nothing to continue: the next run starts over,
whatever its settings; a run with checkpoints is continued only with its own settings."""

import pytest

from quoter.bundle import Bundle
from quoter.errors import QuoterError
from quoter.training.pipeline import CONFIG_FILE, checkpoint_folder, train
from tests.training_fixtures import tiny_config

FAST = {"retrain.enabled": "false", "fusion.enabled": "false"}


def quiet(message):
    pass


@pytest.mark.parametrize("resume", ["true", "false"])
def test_a_run_that_failed_before_its_first_checkpoint_is_retried_with_other_settings(tmp_path, resume):
    failed = tiny_config(tmp_path, **FAST, **{"sememes.source": str(tmp_path / "no-such-lexicon.txt")})
    with pytest.raises(QuoterError, match="no-such-lexicon"):
        train(failed, log=quiet)
    assert (checkpoint_folder(failed) / CONFIG_FILE).is_file()  # what refused the retry
    retry = tiny_config(tmp_path, **FAST, **{"run.resume": resume})
    train(retry, log=quiet)
    assert Bundle.load(retry.run.output).info["trained"] is True


def test_a_run_with_checkpoints_is_continued_only_with_its_own_settings(tmp_path):
    finished = tiny_config(tmp_path, **FAST, **{"run.keep_checkpoints": "true"})
    train(finished, log=quiet)
    folder = checkpoint_folder(finished)
    with pytest.raises(QuoterError, match="holds a run with other settings"):
        train(tiny_config(tmp_path, **FAST, **{"joint.lr": "0.001"}), log=quiet)
    with pytest.raises(QuoterError, match=f"{folder} holds the checkpoints of a run; delete it or set run.resume=true"):
        train(tiny_config(tmp_path, **FAST, **{"run.resume": "false"}), log=quiet)
