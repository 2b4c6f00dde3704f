"The committed task files are exactly what the generators make, and they load cleanly."

from pathlib import Path
import pytest
from thinkingbox_training.tasks import generate_tasks, load_tasks, assert_disjoint

ROOT = Path(__file__).resolve().parents[1]
FILES = {('travel', 'train'): 40, ('travel', 'bench'): 10, ('retail', 'train'): 40, ('retail', 'bench'): 10}


@pytest.mark.parametrize('domain,split', list(FILES))
def test_committed_task_file_is_current(domain, split):
    path = ROOT / 'data' / 'tasks' / f'{domain}_{split}.jsonl'
    made = generate_tasks(domain, split, seed=0 if split == 'train' else 1, n=FILES[(domain, split)])
    assert path.read_text() == ''.join(t.model_dump_json() + '\n' for t in made), (
        f'{path} is stale: regenerate with `tbt generate-tasks` and commit it'
    )


def test_splits_are_disjoint_and_held_out_families_are_bench_only():
    tasks = load_tasks(*sorted((ROOT / 'data' / 'tasks').glob('*.jsonl')))
    train = [t for t in tasks if t.split == 'train']
    bench = [t for t in tasks if t.split == 'bench']
    assert_disjoint([t.uid for t in train], [t.uid for t in bench])
    assert not any(t.held_out_family for t in train)
    held = {t.family for t in bench if t.held_out_family}
    assert len(held) >= 4 and not held & {t.family for t in train}
