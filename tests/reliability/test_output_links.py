"""A campaign directory where someone planted links in place of the files a run writes (the lock, the temporary
files of campaign.json and attempts.jsonl, the store and its WAL): each is refused naming it, and the file a link
points to is never written, created or truncated."""

import os
from pathlib import Path
import pytest
from thinkingbox_training.campaigns import CampaignError, run_campaign
from thinkingbox_training.tasks import Task, ToolCallSpec

PLANTED = ['campaign.lock', 'campaign.json.tmp', 'attempts.jsonl.tmp', 'attempts.sqlite', 'attempts.sqlite-wal']


def one_task():
    return [
        Task(
            uid='demo/pay/0',
            domain='demo',
            family='pay',
            split='bench',
            query='Pay 1 cent from AC-1.',
            reply='Paid.',
            golden=[ToolCallSpec(name='pay', arguments={'account_id': 'AC-1', 'amount_cents': 1})],
        )
    ]


def run(out: Path):
    return run_campaign(out, one_task(), 'scripted', k=1, progress=False, concurrency=1)


@pytest.mark.parametrize('name', PLANTED)
@pytest.mark.parametrize('target', ['a file', 'nothing'])
def test_a_link_planted_in_a_campaign_directory_is_refused_and_not_followed(name, target, tmp_path):
    victim, out = tmp_path / 'precious.txt', tmp_path / 'c'
    if target == 'a file':
        victim.write_text('precious\n')
    out.mkdir()
    (out / name).symlink_to(victim)
    with pytest.raises(CampaignError, match=f'{out / name} is a symbolic link: .*follows no link') as e:
        run(out)
    assert '\n' not in str(e.value)
    if target == 'a file':
        assert victim.read_text() == 'precious\n'
    else:
        assert not victim.exists()  # not created through the link either
    assert (out / name).is_symlink()  # left as it is


def test_a_hard_link_planted_as_the_lock_is_refused(tmp_path):
    victim, out = tmp_path / 'precious.txt', tmp_path / 'c'
    victim.write_text('precious\n')
    out.mkdir()
    os.link(victim, out / 'campaign.lock')
    with pytest.raises(CampaignError, match='campaign.lock is a hard link'):
        run(out)
    assert victim.read_text() == 'precious\n'


def test_a_campaign_without_links_still_runs_and_resumes(tmp_path):
    assert run(tmp_path / 'c')['executed'] == 1
    (tmp_path / 'c' / 'campaign.json.tmp').write_text('a leftover of a killed run\n')  # a plain file: replaced
    assert run(tmp_path / 'c')['executed'] == 0
