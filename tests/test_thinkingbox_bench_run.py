"""`tbt thinkingbox-bench` before and around a run: the harness found beside the data as given, task selection kept
for a resume, the plan printed first, every endpoint checked before the first attempt, their end rules by default
(our caps opt-in) and the count of episodes a cap ended."""

import json, os, socket
import pytest
from thinkingbox_training.thinkingbox import ENV, DATA_UNSET, harness_dir, thinkingbox_bench

ONE = 'sandbox_external_retail_group1.py'  # a module of the release: 98 tasks, no rubric items


@pytest.fixture(scope='module')
def data():
    if not os.environ.get(ENV):
        pytest.skip(DATA_UNSET)
    from thinkingbox_training.thinkingbox import data_dir

    return data_dir()


def test_the_harness_is_found_beside_the_data_folder_as_given_not_beside_a_links_target(data, tmp_path, monkeypatch):
    monkeypatch.delenv('THINKINGBOX_HARNESS', raising=False)
    (tmp_path / 'data').symlink_to(data)  # the data through a link ...
    (tmp_path / 'thinkingbox' / 'thinkingbox').mkdir(parents=True)  # ... with a harness checkout beside the link
    assert harness_dir(str(tmp_path / 'data')) == tmp_path / 'thinkingbox'
    monkeypatch.setenv(ENV, str(tmp_path / 'data'))
    assert harness_dir() == tmp_path / 'thinkingbox'


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def test_every_endpoint_is_checked_before_the_first_attempt(data, tmp_path, monkeypatch, capsys):
    out = tmp_path / 'c'
    monkeypatch.delenv('TBT_JUDGE_BASE_URL', raising=False)
    kw = dict(release=ONE, k=1, out=str(out), quiet=True, limit=1)
    assert thinkingbox_bench(**kw, judge='openai:j') == 2
    err = capsys.readouterr().err.strip()
    assert (
        err
        == 'tbt thinkingbox-bench: judge openai:j needs an OpenAI-compatible endpoint: TBT_JUDGE_BASE_URL is not set'
    )
    url = f'http://127.0.0.1:{_closed_port()}/v1'
    monkeypatch.setenv('TBT_POLICY_BASE_URL', url)
    assert thinkingbox_bench(**kw, policy='chat:m', judge='none') == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f'tbt thinkingbox-bench: policy chat:m: TBT_POLICY_BASE_URL={url} does not answer (')
    assert len(err.splitlines()) == 1 and not (out / 'campaign.json').exists()


def test_a_selection_is_recorded_and_a_resume_runs_the_same_set(data, tmp_path, capsys):
    out = tmp_path / 'c'
    kw = dict(release=ONE, k=1, out=str(out), policy='golden-with-flaws:golden', judge='none')
    assert thinkingbox_bench(**kw, limit=2, task=None) == 0, capsys.readouterr().err
    err = capsys.readouterr().err
    assert 'tbt thinkingbox-bench: 2 task(s) x k=1 = 2 attempt(s); about ' in err  # the plan, before the run
    first = json.loads((out / 'campaign.json').read_text())['tasks']
    assert len(first) == 2 and json.loads((out / 'selection.json').read_text())['limit'] == 2
    assert thinkingbox_bench(**kw, quiet=True) == 0  # no selection given: the recorded one, nothing new to run
    assert 'executed 0 attempt(s) this run; 2 expected' in capsys.readouterr().out
    assert thinkingbox_bench(**kw, quiet=True, limit=3) == 2  # another selection: refused in one line
    err = capsys.readouterr().err.strip()
    assert 'selection.json' in err and 'give the same, or none to resume it' in err and len(err.splitlines()) == 1
    assert thinkingbox_bench(release=ONE, k=1, out=str(tmp_path / 'd'), judge='none', quiet=True, domain='nope') == 2
    assert '--domain nope: no such domain in these tasks; they have sandbox_external_retail' in capsys.readouterr().err


def test_their_end_rules_by_default_our_caps_opt_in_and_counted(data, tmp_path, capsys):
    "No agent-turn cap by default; `--caps` adds ours; the episodes a cap ended are counted in the run and aggregate."
    from thinkingbox_training.campaigns import aggregate
    from thinkingbox_training.thinkingbox import NO_CAP, load_thinkingbox, their_end_rules

    t = load_thinkingbox(ONE)[0]
    assert t.limits.max_turns == 40 and their_end_rules([t])[0].limits.max_turns == NO_CAP
    kw = dict(release=ONE, k=1, policy='scripted', judge='none', quiet=True, limit=1)
    # the generic scripted expert never says <DONE>: under their rules the episode runs to their ten user turns
    assert thinkingbox_bench(**kw, out=str(tmp_path / 'theirs')) == 0
    assert '0 ended by a cap of ours' in capsys.readouterr().out
    rec = json.loads((tmp_path / 'theirs' / 'attempts.jsonl').read_text().splitlines()[0])
    assert rec['termination'] == 'max_user_turns'
    assert thinkingbox_bench(**kw, out=str(tmp_path / 'ours'), caps=True) == 0
    assert 'ended by a cap of ours' in capsys.readouterr().out
    assert aggregate(str(tmp_path / 'ours'), json=True) == 0
    got = json.loads(capsys.readouterr().out)
    assert set(got['ended_by_cap']) <= {'turn_limit', 'token_limit', 'wall_clock'}
    assert got['spent']['agent']['calls'] >= 1 and got['spent']['judge'] == {'calls': 0, 'tokens': 0}
    assert {'pass^1', 'pass^1_tb'} <= set(got['rows'][0]) and 'pass^1_tb' in got[
        'summary'
    ]  # ours and theirs, named apart


def test_the_judge_is_not_asked_after_a_failed_state_and_its_calls_are_counted(data, tmp_path, monkeypatch, capsys):
    "As their test stops at its first failed check: a wrong final state sends no judge request; asked ones are spent."
    from thinkingbox_training.campaigns import aggregate
    from thinkingbox_training.thinkingbox import load_thinkingbox
    from thinkingbox_training.users import StandInServer

    mod = 'sandbox_neobank_support_v1_group1_rubrics_yesno.py'
    task = next(t for t in load_thinkingbox(mod) if t.rubric and len(t.golden) >= 2)
    runs = {}
    for flaw in ('drop_last', 'golden'):
        with StandInServer(chat=lambda messages: 'Yes') as judge:
            monkeypatch.setenv('TBT_JUDGE_BASE_URL', judge.base_url)
            out = tmp_path / flaw
            kw = dict(release=mod, task=task.uid, policy=f'golden-with-flaws:{flaw}', judge='openai:j')
            assert thinkingbox_bench(**kw, k=1, out=str(out), quiet=True) == 0, capsys.readouterr().err
            runs[flaw] = len(judge.requests)
        capsys.readouterr()
        assert aggregate(str(out), json=True) == 0
        assert json.loads(capsys.readouterr().out)['spent']['judge']['calls'] == runs[flaw]
    assert runs['drop_last'] == 0 and runs['golden'] >= 1
