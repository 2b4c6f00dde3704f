"""Their protocol files, damaged: a broken `config/config_vllm.yaml`, one without `orchestrator`, and a broken agent
file (`dataset/agent/think.yaml`) each stop `tbt thinkingbox-bench` with one line naming the file and the key (or the
line YAML stops at), exit 2, before anything is written."""

import os
from pathlib import Path
import pytest
import yaml

AGENT = 'dataset/agent/think.yaml'
CONFIG = 'config/config_vllm.yaml'


@pytest.fixture(scope='module')
def real():
    from thinkingbox_training.thinkingbox import DATA_UNSET, ENV, data_dir, harness_dir

    if not os.environ.get(ENV):
        pytest.skip(DATA_UNSET)
    d = data_dir()
    h = harness_dir(d)
    if not (h / CONFIG).is_file():
        pytest.skip(f'no ThinkingBox harness checkout at {h}')
    return d, h


def checkouts(tmp: Path, real, agent: str = None, config: str = None) -> Path:
    "A data and a harness checkout side by side under `tmp`, links to the real ones but for the file(s) replaced."
    d, h = real
    data, harness = tmp / 'thinkingbox-data', tmp / 'thinkingbox'
    (data / 'dataset' / 'agent').mkdir(parents=True)
    for p in d.iterdir():
        if p.name != 'dataset':
            (data / p.name).symlink_to(p)
    for p in (d / 'dataset').iterdir():
        if p.name != 'agent':
            (data / 'dataset' / p.name).symlink_to(p)
    (data / AGENT).write_text(agent if agent is not None else (d / AGENT).read_text())
    (harness / 'config').mkdir(parents=True)
    (harness / 'thinkingbox').symlink_to(h / 'thinkingbox')
    (harness / CONFIG).write_text(config if config is not None else (h / CONFIG).read_text())
    return data


def cases(real):
    d, h = real
    cfg = yaml.safe_load((h / CONFIG).read_text())
    agent = yaml.safe_load((d / AGENT).read_text())
    no_orch = yaml.safe_dump({k: v for k, v in cfg.items() if k != 'orchestrator'})
    no_temp = yaml.safe_dump(
        {**cfg, 'judge_model': {k: v for k, v in cfg['judge_model'].items() if k != 'temperature'}}
    )
    no_name = yaml.safe_dump({**agent, 'builtin_tools': [{'description': 'x', 'input_schema': {}}]})
    return [
        (dict(config='mcp_proxy: [unclosed\n'), f'{CONFIG}: not valid YAML at line 2'),
        (dict(config=no_orch), f'{CONFIG}: no `orchestrator`'),
        (dict(config=no_temp), f'{CONFIG}: no `judge_model.temperature`'),
        (dict(agent='system_instructions: "unclosed\n'), f'{AGENT}: not valid YAML at line'),
        (dict(agent='- a list\n'), f'{AGENT}: expected a mapping with system_instructions, got list'),
        (dict(agent=no_name), f'{AGENT}: no `builtin_tools[0].name`'),
    ]


def test_a_damaged_protocol_file_is_one_line_naming_file_and_key(real, tmp_path, monkeypatch, capsys):
    from thinkingbox_training.episode import PROTOCOLS
    from thinkingbox_training.thinkingbox import ScenarioDomain, thinkingbox_bench

    monkeypatch.delenv('THINKINGBOX_HARNESS', raising=False)
    p = PROTOCOLS[ScenarioDomain.kind]
    monkeypatch.setattr(p, 'data', p.data)  # the bench points their protocol at its checkout: put it back after
    for i, (files, said) in enumerate(cases(real)):
        data = checkouts(tmp_path / str(i), real, **files)
        out = tmp_path / str(i) / 'c'
        assert thinkingbox_bench(release='banking.py', data=str(data), k=1, out=str(out), judge='none', quiet=True) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith('tbt thinkingbox-bench: ') and said in err and len(err.splitlines()) == 1, (said, err)
        assert not out.exists()
