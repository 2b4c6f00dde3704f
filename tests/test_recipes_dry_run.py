"""Every recipe the project ships passes `scripts/train.py --dry-run`: the recipe parses, its batch arithmetic holds,
the trackers it names start, and its pool is drawn from its task files. Run in process (`grpo.main`, what the script
calls), so the whole file costs one import of the trainer.

A GPU recipe's pool file is made on the GPU (`tbt probe --recipe` + `tbt select` with its base checkpoint), so it is
not shipped: its dry run checks everything else, then the pool is checked again with a stand-in pool file of its
task files' training tasks. Nothing here needs vLLM or DeepSpeed: the dry run imports neither (a server-mode recipe
names its server on the command line at launch). The memory plan needs the checkpoint's config.json and a GPU size;
tests/test_grpo.py checks it for the two GPU recipes on configs of their models' shapes."""

import glob
from pathlib import Path

import pytest
import yaml

from thinkingbox_training.grpo import main
from thinkingbox_training.tasks import load_tasks

ROOT = Path(__file__).resolve().parents[1]
RECIPES = sorted(
    str(Path(p).relative_to(ROOT))
    for p in glob.glob(str(ROOT / 'scripts/recipes/*.yaml')) + glob.glob(str(ROOT / 'data/runs/**/recipes/*.yaml'))
)


def test_the_shipped_recipes_are_found():
    "The glob finds the recipes of both places (a moved folder would otherwise test nothing)."
    assert {'scripts/recipes/tiny_cpu.yaml', 'scripts/recipes/reference_qwen3.yaml'} <= set(RECIPES)
    assert any(r.startswith('data/runs/') for r in RECIPES)


@pytest.mark.parametrize('recipe', RECIPES)
def test_recipe_dry_run(recipe, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)  # recipes name their task files relative to the checkout
    monkeypatch.delenv('RANK', raising=False)
    argv = ['--config', recipe, '--dry-run']
    assert main(argv) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert 'batch: ' in out and 'effective episode budgets: ' in out
    if 'pool: not checked' not in out:
        assert 'pool: ' in out and ' tasks; ' in out
        return
    # only the pool file may be missing, and only a GPU recipe's (the tiny recipes ship or need none)
    spec = yaml.safe_load(Path(recipe).read_text())
    assert spec.get('pool_file') and not Path(spec['pool_file']).exists() and not spec.get('use_cpu'), out
    train = [t.uid for t in load_tasks(*spec['task_files']) if t.split != 'bench' and not t.held_out_family]
    (tmp_path / 'pool.txt').write_text('\n'.join(train) + '\n')
    assert main(argv + ['--pool_file', str(tmp_path / 'pool.txt')]) == 0, capsys.readouterr().out
    assert f'pool: {len(train)} tasks; ' in capsys.readouterr().out
