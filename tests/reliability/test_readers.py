"""Reading a campaign leaves its directory byte for byte as it was: no `attempts.sqlite-wal` or `-shm` made by a
read-only connection, no file touched (names, sizes, bytes and modification times listed before and after)."""

import hashlib, os
from pathlib import Path
from thinkingbox_training.campaigns import aggregate, campaign_records, compare, load_campaign, run_campaign
from thinkingbox_training.tasks import Task, ToolCallSpec


def tasks(n=3):
    return [
        Task(
            uid=f'demo/pay/{i}',
            domain='demo',
            family='pay',
            split='bench',
            query=f'Pay {i + 1} cents from AC-1.',
            reply='Paid.',
            golden=[ToolCallSpec(name='pay', arguments={'account_id': 'AC-1', 'amount_cents': i + 1})],
        )
        for i in range(n)
    ]


def listing(d: Path) -> dict:
    "Each file's size, modification time and bytes, and the folder's own modification time (a file made and removed)."
    files = {
        p.name: (p.stat().st_size, p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
        for p in sorted(d.iterdir())
    }
    return {**files, '.': d.stat().st_mtime_ns}


def test_reading_a_campaign_leaves_its_directory_as_it_found_it(tmp_path, capsys):
    a, b = tmp_path / 'a', tmp_path / 'b'
    run_campaign(a, tasks(), 'scripted', k=2, progress=False, concurrency=2)
    run_campaign(b, tasks(), 'scripted', k=2, progress=False, concurrency=2)
    before = {d: listing(d) for d in (a, b)}
    assert not [n for n in before[a] if n.endswith(('-wal', '-shm'))]
    assert load_campaign(a).rewards.shape == (3, 2) and len(campaign_records(b)) == 6
    assert aggregate(str(a)) == 0 and aggregate(str(b), json=True) == 0
    assert compare(str(a), str(b)) == 0
    capsys.readouterr()
    assert {d: listing(d) for d in (a, b)} == before


def test_a_store_a_run_still_holds_is_read_through_its_wal(tmp_path):
    "A `-wal` beside the store (a run holds it, or was killed): what it holds is read, not only the file's pages."
    from thinkingbox_training.campaigns import AttemptStore
    from thinkingbox_training.episode import AttemptRecord

    a = tmp_path / 'a'
    run_campaign(a, tasks(1), 'scripted', k=1, progress=False, concurrency=1)
    writer = AttemptStore(a / 'attempts.sqlite')  # a live writer: what it commits stays in its WAL for now
    writer.db.execute('PRAGMA wal_autocheckpoint=0')
    rec = AttemptRecord(**{**campaign_records(a)[0], 'repetition': 1})
    try:
        writer.put(rec, writer.begin('a'))
        assert os.path.getsize(a / 'attempts.sqlite-wal') > 0
        assert [r['repetition'] for r in campaign_records(a)] == [0, 1]
    finally:
        writer.close()
