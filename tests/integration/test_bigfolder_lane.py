"""A big folder's texts and the agent's express lane (resident/jobrunner.py `_job_step`), with the bundled model in its
worker processes: the real model, the real agent in-process."""

from __future__ import annotations

import shutil
from pathlib import Path

from ragd.config import Config
from ragd.pipeline.embed import FEW_TEXTS
from ragd.pipeline.rounds import FILES_PER_ROUND
from tests.support.inproc import agent_in_process, control


def test_a_folder_that_appears_is_embedded_by_the_workers_not_by_the_agents_copy_of_the_model(
    tmp_path: Path,
) -> None:
    """A folder that appears starts an express job (a change was seen there), but a job that reports in steps is no
    edit: its texts go to the workers, in turn. Before, each of its files' texts (a few, under the express lane's
    16) went to the agent's own copy of the model: a folder of 30,000 notes was largely embedded in the agent's
    process, one file at a time, beside the workers (the agent's memory and its throughput: docs/benchmarks.md). Only
    the first few texts, while the workers are not running yet, go to that copy (pipeline/embed FEW_TEXTS)."""
    root, outside = tmp_path / "kb", tmp_path / "outside" / "notes"
    root.mkdir()
    outside.mkdir(parents=True)
    files = FILES_PER_ROUND * 2
    for i in range(files):
        (outside / f"n{i:04d}.md").write_text(f"# Note {i}\n\nlanetoken {i} 标记 {i}\n", encoding="utf-8")
    config = Config.model_validate({"watch": {"quiet": 0.2, "ceiling": 1.0}, "run": {"workers": 1}})
    with agent_in_process(config, [root]) as life:
        control(life, "wait", {"timeout": 120})
        shutil.move(outside, root / "notes")
        control(life, "wait", {"timeout": 600})
        st = control(life, "status")
        assert st["roots"][0]["files"]["EMBEDDED"] == files
        embed = life.agent.embed
        assert embed.stats.texts_embedded >= files
        express = (
            embed._express
        )  # the agent's copy's lane (an edit's texts, a few while the workers are down)
        # at most the few texts before the workers started (the first note's), never the folder one file at a time
        assert express is None or express.stats.texts_embedded <= FEW_TEXTS, express.stats
        assert (
            embed.stats.texts_embedded - (express.stats.texts_embedded if express else 0) >= files - FEW_TEXTS
        )
