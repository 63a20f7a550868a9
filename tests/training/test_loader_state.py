"""Exact resume through torchdata's StatefulDataLoader: N + M batches equal N batches, a JSON save, a new
process, a load and M batches (the mixture in random and epoch mode, the map-style dataset with its sampler
across an epoch end, the mixture in the middle of a schedule's ramp; 0 and 2 workers); states of another worker
count or another plan are refused."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torchdata.stateful_dataloader import StatefulDataLoader

from niels_gpt.training.loader_state import load_loader_state, saved_num_workers
from niels_gpt.training.mixture import MixedBatches
from niels_gpt.training.samplers import EpochSampler
from niels_gpt.training.torch_data import PretrainWindows
from tests.support.dict_batches import same, take
from tests.training.test_schedule import RAMP

ROOT = Path(__file__).resolve().parents[2]
P = {"fineweb_edu": 0.5, "wikitext": 0.3, "gutenberg": 0.2}  # the sources of loader_caches
N, M = 13, 17  # mixture: 30 batches of 8 rows cross epoch ends of every source (35-39 windows at T=64)
# (kind, mode, num_workers); "items": PretrainWindows of wikitext (35 windows) + EpochSampler, batches of 4:
# N batches end in the second epoch, M more reach the fourth
# "ramp": the mixture under a schedule whose ramp is under way at batch N (test_schedule.RAMP)
KINDS = (("mixture", "random"), ("mixture", "epoch"), ("items", None), ("ramp", "random"), ("ramp", "epoch"))
CASES = [(kind, mode, k) for kind, mode in KINDS for k in (0, 2)]


def make_loader(root: Path, kind: str, mode: str | None, num_workers: int, seed: int = 7) -> StatefulDataLoader:
    if kind in ("mixture", "ramp"):
        ds = MixedBatches.pretrain(root, p=P if kind == "mixture" else RAMP, T=64, B=8, seed=seed, mode=mode)
        return StatefulDataLoader(ds, batch_size=None, num_workers=num_workers)
    ds = PretrainWindows(root / "pretrain" / "wikitext" / "train", T=64)
    return StatefulDataLoader(ds, batch_size=4, sampler=EpochSampler(ds, seed=seed), num_workers=num_workers)


def case_name(kind: str, mode: str | None, num_workers: int) -> str:
    return f"{kind}-{mode}-k{num_workers}"


def resume_all(root: str, folder: str) -> None:
    """In a new process: load every case's saved JSON state into a new loader and save its next M batches."""
    for kind, mode, k in CASES:
        name = case_name(kind, mode, k)
        loader = make_loader(Path(root), kind, mode, k)
        loader.load_state_dict(json.loads((Path(folder) / f"{name}.json").read_text()))
        torch.save(take(loader, M), Path(folder) / f"{name}.pt")


@pytest.fixture(scope="module")
def resumed(loader_caches, tmp_path_factory) -> dict:
    """{case: (N + M batches straight, the first N, the M batches a new process read after loading the state)}."""
    folder = tmp_path_factory.mktemp("states")
    runs = {}
    for kind, mode, k in CASES:
        name = case_name(kind, mode, k)
        straight = take(make_loader(loader_caches, kind, mode, k), N + M)
        saver = make_loader(loader_caches, kind, mode, k)
        first = take(saver, N)
        (folder / f"{name}.json").write_text(json.dumps(saver.state_dict()))
        runs[name] = (straight, first)
    code = f"import tests.training.test_loader_state as t; t.resume_all({str(loader_caches)!r}, {str(folder)!r})"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {name: (*run, torch.load(folder / f"{name}.pt")) for name, run in runs.items()}


@pytest.mark.parametrize("case", CASES, ids=lambda c: case_name(*c))
def test_n_batches_save_new_process_load_m_batches_equal_n_plus_m(resumed, case):
    straight, first, after = resumed[case_name(*case)]
    assert same(first, straight[:N]) and same(after, straight[N:])


def test_the_batches_do_not_depend_on_the_worker_count(resumed):
    for kind, mode, _ in CASES[::2]:
        assert same(resumed[case_name(kind, mode, 0)][0], resumed[case_name(kind, mode, 2)][0])


@pytest.fixture(scope="module")
def states(loader_caches) -> dict[int, dict]:
    """JSON states of the epoch-mode mixture after 3 batches, by num_workers."""
    out = {}
    for k in (0, 2):
        loader = make_loader(loader_caches, "mixture", "epoch", k)
        take(loader, 3)
        out[k] = json.loads(json.dumps(loader.state_dict()))
    return out


def test_saved_num_workers_reads_either_layout(states):
    assert saved_num_workers(states[0]) == 0 and saved_num_workers(states[2]) == 2
    with pytest.raises(ValueError, match="not a StatefulDataLoader state"):
        saved_num_workers({"step": 3})


@pytest.mark.filterwarnings("ignore:This DataLoader will create 3 worker processes")
@pytest.mark.parametrize("saved, loading", [(2, 0), (0, 2), (2, 3)])
def test_a_state_of_another_worker_count_is_refused_with_one_message(loader_caches, states, saved, loading):
    for kind, mode in (("mixture", "epoch"), ("items", None)):
        with pytest.raises(
            ValueError, match=f"saved by a loader with num_workers={saved} and this loader has num_workers={loading}"
        ):
            load_loader_state(make_loader(loader_caches, kind, mode, loading), states[saved])


def test_load_loader_state_loads_a_state_of_the_same_count(loader_caches, states):
    loader = make_loader(loader_caches, "mixture", "epoch", 0)
    load_loader_state(loader, states[0])
    assert same(take(loader, 2), take(make_loader(loader_caches, "mixture", "epoch", 0), 5)[3:])
    load_loader_state(loader, {})  # an empty state starts afresh, as StatefulDataLoader does


def test_the_mixture_itself_refuses_another_worker_count(loader_caches, states, monkeypatch):
    # the loader iterator whose workers failed at start-up waits MP_STATUS_CHECK_INTERVAL (5 s) for each of
    # them when it is collected: shortened here
    monkeypatch.setattr(torch.utils.data._utils, "MP_STATUS_CHECK_INTERVAL", 0.2)
    loader = make_loader(loader_caches, "mixture", "epoch", 1)
    loader.load_state_dict(states[2])
    with pytest.raises(ValueError, match="saved by worker 0 of num_workers=2, loaded into worker 0 of 1"):
        take(loader, 1)
    gc.collect()


@pytest.mark.parametrize("kind, mode", [("mixture", "epoch"), ("items", None)])
def test_a_state_of_another_plan_is_refused_with_the_mixed_loader_message(loader_caches, kind, mode):
    saver = make_loader(loader_caches, kind, mode, 0)
    take(saver, 2)
    loader = make_loader(loader_caches, kind, mode, 0, seed=8)
    loader.load_state_dict(json.loads(json.dumps(saver.state_dict())))
    with pytest.raises(ValueError, match="refusing to resume from a state of a different loader \\(seed: state has 7"):
        take(loader, 1)


def test_a_stateful_loader_says_nothing_about_torchdatas_deprecated_calls():
    import warnings

    from niels_gpt.training.loader_state import stateful_loader

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        loader = stateful_loader(list(range(8)), batch_size=4, num_workers=0)
        assert [len(b) for b in loader] == [4, 4]
    assert not [w for w in seen if "set_vital" in str(w.message)], [str(w.message) for w in seen]
