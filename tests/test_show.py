"`tbt show`: one attempt of a campaign read back from its store, or from its export, readably; bad input named."

import contextlib, io, json, shutil, subprocess, sys
from pathlib import Path
import pytest
from thinkingbox_training.tasks import Task, ToolCallSpec
from thinkingbox_training.campaigns import campaign_records, run_campaign
from thinkingbox_training.cli import main

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / 'data' / 'runs' / 'tiny-cpu' / 'eval-base'
UID = 'retail/address_change_before_shipping/bench-1-0000'


def tbt(*args) -> tuple:
    "`tbt ARGS` in this process: (exit code, stdout, stderr)."
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(args))
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture(scope='module')
def camp(tmp_path_factory):
    "A finished campaign of the scripted expert with flaws on demo tasks: failed and passed attempts."
    tasks = [
        Task(
            uid=f'demo/pay/{i:02d}',
            domain='demo',
            family='pay',
            split='bench',
            query=f'Pay {a} cents.',
            golden=[ToolCallSpec(name='pay', arguments={'account_id': 'AC-1', 'amount_cents': a})],
            reply='Paid.',
        )
        for i, a in enumerate([100, 250, 999])
    ]
    out = tmp_path_factory.mktemp('show') / 'camp'
    r = run_campaign(out, tasks, 'scripted:flaw=0.3', k=4, progress=False)
    assert r['executed'] == 12
    return out


def test_show_prints_the_first_failed_attempt_with_its_conversation_verdict_and_diff(camp):
    recs = campaign_records(camp)
    first = min((r for r in recs if r['reward'] == 0), key=lambda r: (r['task_uid'], r['repetition']))
    rc, out, err = tbt('show', str(camp))
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0].startswith(f"{first['task_uid']} attempt {first['repetition']} of campaign 'camp'"), out
    assert 'reward 0' in lines[0] and 'conversation:' in lines and '  user:   Pay' in out, out
    assert 'verdict: reward 0 (state FAILED)' in lines, out
    assert any(l.startswith('state diff (expected vs final) in ') for l in lines), out
    assert all(f'  - {r}' in lines for r in first['verdict']['reasons']), out


def test_show_picks_a_task_and_attempt_with_its_calls_and_results(camp):
    ok = next(r for r in campaign_records(camp) if r['reward'] == 1)
    rc, out, err = tbt('show', str(camp), '--task', ok['task_uid'], '--attempt', str(ok['repetition']))
    assert rc == 0, err
    call = ok['messages'][1]['tool_calls'][0]
    assert f"  call:   pay(account_id='AC-1', amount_cents={call['function']['arguments']['amount_cents']})" in out, out
    assert '  result: {"balance_cents": ' in out and '  agent:  Paid.' in out, out
    assert 'verdict: reward 1 (state ok)' in out and 'state diff: none (every table as expected)' in out, out


def test_show_reads_the_export_where_the_store_is_absent(camp, tmp_path):
    exported = tmp_path / 'exported'
    exported.mkdir()
    for f in ('campaign.json', 'attempts.jsonl'):
        shutil.copy(camp / f, exported / f)
    assert not (exported / 'attempts.sqlite').exists()
    for args in ((), ('--task', 'demo/pay/02'), ('--task', 'demo/pay/01', '--attempt', '3')):
        a, b = tbt('show', str(camp), *args), tbt('show', str(exported), *args)
        assert a[0] == b[0] == 0 and a[1] == b[1] and 'conversation:\n  user:' in a[1], (a, b)


def test_show_reads_a_committed_run():
    rc, out, err = tbt('show', str(COMMITTED), '--task', UID, '--attempt', '0')
    assert rc == 0, err
    assert out.startswith(f"{UID} attempt 0 of campaign 'eval-base', policy tiny-qwen3: reward 0"), out
    assert (
        "  - shipment[SH-589561].address: expected '13 Meadow Way, Brighton BN1 1UG', "
        "got '13 Church Lane, Brighton BN1 1UG'"
    ) in out, out


def test_show_reads_records_written_before_they_kept_the_conversation(camp, tmp_path):
    old = tmp_path / 'old'
    old.mkdir()
    shutil.copy(camp / 'campaign.json', old / 'campaign.json')
    recs = [{k: v for k, v in r.items() if k != 'messages'} for r in campaign_records(camp)]
    for r in recs:
        r['verdict'].pop('checks')
    (old / 'attempts.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in recs))
    rc, out, err = tbt('show', str(old))
    assert rc == 0, err
    new = tbt('show', str(camp))[1].splitlines()
    assert out.splitlines()[0] == new[0] and 'conversation: not in this record' in out, out
    assert 'verdict: reward 0' in out.splitlines() and [l for l in new if l.startswith(('state diff', '  - '))] == [
        l for l in out.splitlines() if l.startswith(('state diff', '  - '))
    ], out


@pytest.mark.parametrize(
    'args,msg,code',
    [
        (('/no/such/campaign',), 'tbt show: campaign /no/such/campaign: no such directory', 2),
        ((str(ROOT / 'data' / 'runs' / 'tiny-cpu'),), 'is not a campaign directory (no campaign.json)', 1),
        ((str(COMMITTED), '--task', 'retail/nope'), "tbt show: no task 'retail/nope' in this campaign (260 tasks", 1),
        (
            (str(COMMITTED), '--task', UID, '--attempt', '7'),
            f"tbt show: task '{UID}' has no attempt 7 (attempts stored: 0, 1, 2, 3)",
            1,
        ),
        ((str(COMMITTED), '--attempt', '1'), 'tbt show: --attempt needs --task', 1),
        ((str(COMMITTED), '--task', UID, '--attempt', '-1'), 'tbt show: --attempt -1: must be at least 0', 2),
        ((str(COMMITTED), '--width', '-5'), 'tbt show: --width -5: must be at least 0', 2),
    ],
)
def test_show_names_bad_input_in_one_line(args, msg, code):
    rc, out, err = tbt('show', *args)
    assert rc == code and not out and msg in err and len(err.strip().splitlines()) == 1, (rc, out, err)


def test_tbt_show_as_a_command(camp, capsys):
    "The console script end to end: listed by `tbt --help`, run in its own process."
    cli = 'import sys; from thinkingbox_training.cli import main; sys.exit(main())'
    h = subprocess.run([sys.executable, '-c', cli, '--help'], capture_output=True, text=True, cwd=ROOT)
    assert h.returncode == 0 and any(l.split()[:2] == ['show', 'Print'] for l in h.stdout.splitlines()), h.stdout
    with pytest.raises(SystemExit) as e:
        main(['show', '--help'])  # its help is its function's parser
    o = capsys.readouterr().out
    assert e.value.code == 0 and o.startswith('usage: tbt show') and '--width' in o, o
    p = subprocess.run(
        [sys.executable, '-c', cli, 'show', str(camp), '--width', '12'], capture_output=True, text=True, cwd=ROOT
    )
    assert p.returncode == 0 and p.stdout.startswith('demo/pay/'), p.stderr
    assert all(len(l) <= 10 + 12 for l in p.stdout.splitlines() if l.startswith(('  result:', '  call:'))), p.stdout
