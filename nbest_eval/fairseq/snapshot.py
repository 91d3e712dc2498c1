"""The snapshot a ``translation_nbest`` run in ``--nbest-mode async`` hands off (issue 33): an ordinary
fairseq checkpoint without optimizer state, so that the sidecar (:mod:`.async_eval`), ``nbest-eval
select`` and ``fairseq-generate`` all read it; and the run's task settings, as the manifest records them."""

from typing import Any, Dict, Mapping

from omegaconf import OmegaConf

#: the key in a snapshot's ``extra_state`` that says what it is (tags, dtype, when it was handed off)
SNAPSHOT_KEY = "nbest_snapshot"


def snapshot_state(cfg: Any, model: Any, task: Any, epoch: int, updates: int, info: Mapping[str, Any]
                   ) -> Dict[str, Any]:
    """A weights-only checkpoint of ``model`` (the unwrapped model being trained) under the run's
    ``cfg``: what fairseq's ``load_checkpoint_to_cpu`` reads, with no optimizer or criterion state."""
    container = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True) if OmegaConf.is_config(cfg) else cfg
    return {"args": None, "cfg": container, "model": model.state_dict(), "criterion": None,
            "optimizer_history": [{"criterion_name": None, "optimizer_name": None, "lr_scheduler_state": {},
                                   "num_updates": updates}],
            "task_state": task.state_dict(),
            "extra_state": {"epoch": epoch, "train_iterator": {"epoch": epoch}, SNAPSHOT_KEY: dict(info)}}


def task_settings(cfg: Any) -> Dict[str, Any]:
    """The run's task config as plain JSON, for the manifest: what the evaluator builds its task from."""
    return OmegaConf.to_container(cfg.task, resolve=True, enum_to_str=True)
