"""`tbt thinkingbox-bench` as a new user meets it: where the data goes, a task module by name from any folder, and
rubric items that the offline judge cannot read."""

import json, hashlib, os
import pytest
from thinkingbox_training.thinkingbox import DATA_UNSET, ENV, thinkingbox_bench


@pytest.fixture(scope='module')
def data():
    if not os.environ.get(ENV):
        pytest.skip(DATA_UNSET)
    from thinkingbox_training.thinkingbox import data_dir

    return data_dir()


def test_unset_data_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(ENV, raising=False)
    assert thinkingbox_bench(release='banking.py', k=1, out=str(tmp_path / 'c'), quiet=True) == 2
    err = capsys.readouterr().err
    assert err.strip() == f'tbt thinkingbox-bench: {DATA_UNSET}' and len(err.strip().splitlines()) == 1
    assert 'microsoft/thinkingbox-data' in DATA_UNSET and not (tmp_path / 'c').exists()


def test_no_folder_layout_is_assumed_in_code_or_docs():
    "No default data location beside the project: the user's THINKINGBOX_DATA (or --data) says where the clone is."
    from pathlib import Path

    root = Path(__file__).parent.parent
    texts = {
        p: p.read_text()
        for p in [root / 'README.md', *(root / 'nbs').rglob('*.ipynb'), *(root / 'thinkingbox_training').glob('*.py')]
    }
    assert [str(p) for p, t in texts.items() if '../shared' in t] == []


def test_rubric_tasks_without_a_judge_are_refused_naming_both_choices(data, tmp_path, capsys):
    "No `--judge` default where tasks have rubric items: one line lists `openai:MODEL` and `none`, each explained."
    out = tmp_path / 'c'
    assert thinkingbox_bench(release='banking.py', k=1, out=str(out), quiet=True) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith('tbt thinkingbox-bench: 12 task(s) have rubric items: choose a judge: --judge openai:MODEL')
    assert '--judge none (the state alone' in err and 'not comparable with the published table' in err
    assert len(err.splitlines()) == 1 and not (out / 'campaign.json').exists()
    # the rule judge, asked for by name, is still refused before anything runs
    assert thinkingbox_bench(release='banking.py', k=1, out=str(out), judge='rule', quiet=True) == 2
    assert 'rubric items the rule judge cannot read' in capsys.readouterr().err
    assert not (out / 'campaign.json').exists() and not (out / 'attempts.sqlite').exists()


def test_a_module_by_name_runs_from_any_folder(data, tmp_path, monkeypatch, capsys):
    from thinkingbox_training.users import StandInServer

    monkeypatch.chdir(tmp_path)  # no banking.py here: found under dataset/test_case, as the loader finds it
    with StandInServer(chat=lambda messages: 'yes') as judge:
        monkeypatch.setenv('TBT_JUDGE_BASE_URL', judge.base_url)
        rc = thinkingbox_bench(
            release='banking.py', policy='scripted', k=1, out='c', judge='openai:j', judge_max_tokens=64, quiet=True
        )
        # their judge request names its budget `max_completion_tokens`; the one given here replaces their 128
        asked = [b['max_completion_tokens'] for p, b in judge.requests]
    assert rc == 0, capsys.readouterr().err
    meta = json.loads((tmp_path / 'c' / 'campaign.json').read_text())
    module = data / 'dataset/test_case/banking.py'
    assert meta['task_files_sha256'] == hashlib.sha256(module.read_bytes()).hexdigest()
    assert meta['judge'] == 'openai:j' and len(meta['tasks']) == 12 and asked and set(asked) == {64}


def test_a_source_that_names_nothing_is_one_error_and_exit_2(data, tmp_path, capsys):
    assert thinkingbox_bench(release=str(tmp_path / 'nope.py'), k=1, out=str(tmp_path / 'c'), quiet=True) == 2
    assert 'nope.py:0: no such task module' in capsys.readouterr().err
    assert thinkingbox_bench(release='nope', k=1, out=str(tmp_path / 'c'), quiet=True) == 2
    assert 'a release name (thinkingbox_bench_v1, dataset_2604_airline_tau_bench) or all' in capsys.readouterr().err


def test_judge_none_grades_the_state_alone_and_records_each_rubric_item_not_judged(data, tmp_path, capsys):
    "The state verdict against their hash alone: `--judge none` gives it, and says so on every verdict."
    from thinkingbox_training.cli import main
    from thinkingbox_training.thinkingbox import load_thinkingbox

    tasks = load_thinkingbox('sandbox_neobank_support_v1_group1_rubrics_yesno.py')
    task = next(t for t in tasks if t.rubric and len(t.golden) >= 2)
    (tmp_path / 'one.yaml').write_text(f'- {task.uid}\n')
    out = tmp_path / 'c'
    argv = [
        'thinkingbox-bench',
        '--release',
        str(tmp_path / 'one.yaml'),
        '--policy',
        'golden-with-flaws:golden,drop_last',
    ]
    assert main([*argv, '--k', '2', '--judge', 'none', '--out', str(out), '--quiet']) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(['show', str(out), '--task', task.uid, '--attempt', '0']) == 0
    shown = next(x for x in capsys.readouterr().out.splitlines() if x.startswith('verdict:'))
    assert 'rubric[0] not judged' in shown and 'not judged ok' not in shown and 'not judged FAILED' not in shown
    assert json.loads((out / 'campaign.json').read_text())['judge'] == 'none'
    recs = {r['reward']: r for r in map(json.loads, (out / 'attempts.jsonl').read_text().splitlines())}
    not_judged = [f'rubric: {it.question} -> not judged' for it in task.rubric]
    assert sorted(recs) == [0, 1] and recs[1]['verdict']['reasons'] == not_judged  # a pass names what it did not judge
    failed = recs[0]['verdict']['reasons']  # without its last call: their hash decides, the items still not judged
    assert failed[0].startswith('(state sha256)') and failed[-len(not_judged) :] == not_judged
