"""`tbt reproduce` with a damaged parts.json (garbage, empty, cut, not UTF-8, nested past the parser, another
shape): one line naming the file, and the file is left byte for byte as it was, with nothing run."""

import json
from types import SimpleNamespace
import pytest
from tbt_lab import study as S
from test_study import tiny_study

GOOD = {'parts': {'1': {'invocations': [{'started': 'x', 'stages': {}, 'wall_s': 1.5}], 'wall_s': 1.5}}}
TEXT = json.dumps(GOOD, indent=1)
DAMAGED = {
    'garbage': b'\x00\x01garbage{',
    'empty': b'',
    'cut': TEXT[: len(TEXT) // 2].encode(),
    'not UTF-8': b'{"parts": {"\xff": {}}}',
    'nested': b'[' * 100_000,
    'a list': b'[1, 2]',
    'parts a list': b'{"parts": []}',
    'invocations missing': b'{"parts": {"1": {}}}',
    'an invocation a string': b'{"parts": {"1": {"invocations": ["x"]}}}',
    'wall_s a string': b'{"parts": {"1": {"invocations": [{"stages": {}, "wall_s": "1"}]}}}',
}


@pytest.mark.parametrize('case', list(DAMAGED))
def test_a_damaged_parts_log_is_refused_in_one_line_naming_it(case, tmp_path):
    f = tmp_path / 'parts.json'
    f.write_bytes(DAMAGED[case])
    with pytest.raises(SystemExit) as e:
        S.read_parts(SimpleNamespace(path=tmp_path))
    msg = str(e.value.code)
    assert msg.startswith(f'{f} is damaged (') and 'left as it is' in msg and '\n' not in msg, msg
    assert f.read_bytes() == DAMAGED[case]


def test_a_good_parts_log_reads_as_written(tmp_path):
    (tmp_path / 'parts.json').write_text(TEXT)
    assert S.read_parts(SimpleNamespace(path=tmp_path)) == GOOD


def test_reproduce_refuses_a_damaged_parts_log_before_running_anything(tmp_path):
    st = tiny_study(tmp_path)
    f = st.path / 'parts.json'
    f.write_bytes(DAMAGED['cut'])
    with pytest.raises(SystemExit, match='parts.json is damaged'):
        S.reproduce(st, [1])
    assert f.read_bytes() == DAMAGED['cut']
    assert {S.stage_status(st, s).state for s in st.part(1)} == {'todo'}  # no stage ran
