"""Broken task files: each is refused at load time with an error that names the file, the line, the uid and the
field at fault (as far as the line has them), and nothing of the file loads. Also the files that must load."""

import copy, json
import pytest
from thinkingbox_training.tasks import TaskFileError, generate_tasks, load_tasks
from thinkingbox_training.grader import DefectiveTask, check_defects

TRAVEL = next(t for t in generate_tasks('travel', 'bench', seed=1, n=1) if t.family == 'cancel_within_window')
RETAIL = next(t for t in generate_tasks('retail', 'bench', seed=1, n=1) if t.family == 'return_in_window')
GOOD_T, GOOD_R = TRAVEL.model_dump(mode='json'), RETAIL.model_dump(mode='json')
UID_T, UID_R = GOOD_T['uid'], GOOD_R['uid']


def line(rec) -> bytes:
    return json.dumps(rec).encode() + b'\n'


def changed(rec, f) -> dict:
    rec = copy.deepcopy(rec)
    f(rec)
    return rec


def _set(path, value):
    "A change that sets `path` (a list of keys) to `value`, or deletes it if value is DELETE."

    def f(rec):
        d = rec
        for k in path[:-1]:
            d = d[k]
        if value is DELETE:
            d.pop(path[-1], None)
        else:
            d[path[-1]] = value

    return f


DELETE = object()


def bad(rec, path, value):
    return line(changed(rec, _set(path, value)))


# (case id, file bytes, expected problem: line, uid, field (prefix), message substring)
CASES = [
    ('uid-is-a-number', bad(GOOD_T, ['uid'], 17), 1, '17', 'uid', 'valid string'),
    ('uid-is-an-object', bad(GOOD_T, ['uid'], {'a': 1}), 1, '{"a": 1}', 'uid', 'valid string'),
    ('uid-missing', bad(GOOD_T, ['uid'], DELETE), 1, None, 'uid', 'Field required'),
    ('uid-empty', bad(GOOD_T, ['uid'], ''), 1, '', 'uid', 'at least 1 character'),
    ('not-utf8', line(GOOD_R) + b'{"uid": "caf\xe9"}\n', 2, None, None, 'not UTF-8: byte 0xe9 at column 13'),
    ('latin1-file', '{"uid": "r\u00e9sum\u00e9"}\n'.encode('latin-1'), 1, None, None, 'not UTF-8'),
    ('invalid-json', line(GOOD_T) + b'{"uid": "x",\n', 2, None, None, 'invalid JSON'),
    ('json-nested-50000-deep', b'[' * 50_000 + b']' * 50_000 + b'\n', 1, None, None, 'nested too deeply'),
    (
        'integer-of-5000-digits',
        b'{"uid": "t/x/1", "n": ' + b'9' * 5000 + b'}\n',
        1,
        None,
        None,
        'invalid JSON: Exceeds the limit',
    ),
    ('not-an-object', line(GOOD_T) + b'[1, 2, 3]\n', 2, None, None, 'valid dictionary'),
    ('unknown-domain', bad(GOOD_T, ['domain'], 'airline'), 1, UID_T, 'domain', "unknown domain 'airline'"),
    ('bad-split', bad(GOOD_T, ['split'], 'dev'), 1, UID_T, 'split', "'train' or 'bench'"),
    (
        'held-out-in-train',
        line(changed(GOOD_T, lambda r: r.update(held_out_family=True, split='train'))),
        1,
        UID_T,
        None,
        'bench-only',
    ),
    ('unknown-field', bad(GOOD_T, ['difficulty'], 'hard'), 1, UID_T, 'difficulty', 'Extra inputs'),
    ('zero-turns', bad(GOOD_T, ['limits', 'max_turns'], 0), 1, UID_T, 'limits.max_turns', 'greater than 0'),
    (
        'infinite-wall-clock',
        bad(GOOD_T, ['limits', 'wall_clock_s'], float('inf')),
        1,
        UID_T,
        'limits.wall_clock_s',
        'finite',
    ),
    (
        'golden-unknown-tool',
        bad(GOOD_T, ['golden', 0, 'name'], 'teleport'),
        1,
        UID_T,
        'golden[0].name',
        "unknown tool 'teleport'",
    ),
    (
        'golden-missing-argument',
        bad(GOOD_T, ['golden', 0, 'arguments'], {}),
        1,
        UID_T,
        'golden[0].arguments.booking_id',
        'Field required',
    ),
    (
        'golden-argument-type',
        bad(GOOD_R, ['golden', -1, 'arguments', 'quantity'], 'two'),
        1,
        UID_R,
        'golden[',
        'valid integer',
    ),
    (
        'init-unknown-table',
        bad(GOOD_T, ['init', 'hotel_review'], [{'id': 1}]),
        1,
        UID_T,
        'init.hotel_review[0]',
        'unknown table',
    ),
    (
        'init-unknown-column',
        bad(GOOD_T, ['init', 'traveller', 0, 'shoe_size'], 42),
        1,
        UID_T,
        'init.traveller[0].shoe_size',
        'unknown column',
    ),
    (
        'init-money-as-text',
        bad(GOOD_T, ['init', 'booking', 0, 'total_cents'], '120.00'),
        1,
        UID_T,
        'init.booking[0].total_cents',
        'integer',
    ),
    (
        'init-bad-date',
        bad(GOOD_T, ['init', 'booking', 0, 'check_in'], '2026-02-30'),
        1,
        UID_T,
        'init.booking[0].check_in',
        'ISO date',
    ),
    ('init-no-primary-key', bad(GOOD_T, ['init', 'traveller', 0, 'id'], DELETE), 1, UID_T, None, 'primary key'),
    (
        'init-integer-out-of-range',
        bad(GOOD_T, ['init', 'booking', 0, 'total_cents'], 2**70),
        1,
        UID_T,
        'init.booking[0].total_cents',
        'out of range',
    ),
    (
        'init-lone-surrogate',
        bad(GOOD_T, ['init', 'traveller', 0, 'name'], 'Ana \ud800'),
        1,
        UID_T,
        'init.traveller.0.name',
        'not valid Unicode',
    ),
    ('query-lone-surrogate', bad(GOOD_T, ['query'], 'cancel \udfff please'), 1, UID_T, 'query', 'not valid Unicode'),
    (
        'init-fk-missing-traveller',
        bad(GOOD_T, ['init', 'booking', 0, 'traveller_id'], 'TR-0'),
        1,
        UID_T,
        'init.booking[0].traveller_id',
        "no traveller 'TR-0'",
    ),
    (
        'init-fk-missing-customer',
        bad(GOOD_R, ['init', 'order', 0, 'customer_id'], 'CU-0'),
        1,
        UID_R,
        'init.order[0].customer_id',
        "no customer 'CU-0'",
    ),
    (
        'init-fk-missing-room',
        bad(GOOD_T, ['init', 'booking', 0, 'room_id'], 'RM-9999'),
        1,
        UID_T,
        'init.booking[0].room_id',
        "no room 'RM-9999'",
    ),
    (
        'init-fk-missing-product',
        bad(GOOD_R, ['init', 'order_item', 0, 'product_id'], 'PR-0'),
        1,
        UID_R,
        'init.order_item[0].product_id',
        "no product 'PR-0'",
    ),
    (
        'init-not-null-missing',
        bad(GOOD_T, ['init', 'booking', 0, 'total_cents'], DELETE),
        1,
        UID_T,
        'init.booking[0].total_cents',
        'may not be null',
    ),
    (
        'init-not-null-customer-name',
        bad(GOOD_R, ['init', 'customer', 0, 'name'], DELETE),
        1,
        UID_R,
        'init.customer[0].name',
        'may not be null',
    ),
    (
        'init-null-in-not-null',
        bad(GOOD_R, ['init', 'order', 0, 'status'], None),
        1,
        UID_R,
        'init.order[0].status',
        'may not be null',
    ),
    ('customer-missing', bad(GOOD_T, ['customer'], DELETE), 1, UID_T, 'customer', 'serves one customer per task'),
    ('customer-unknown', bad(GOOD_R, ['customer'], 'CU-0'), 1, UID_R, 'customer', "no customer 'CU-0'"),
    (
        'customer-on-demo',
        line({'uid': 'demo/x/0', 'domain': 'demo', 'family': 'x', 'split': 'train', 'query': 'q', 'customer': 'AC-1'}),
        1,
        'demo/x/0',
        'customer',
        'has no customers',
    ),
    (
        'rubric-without-question',
        bad(GOOD_T, ['rubric'], [{'require': ['refund']}]),
        1,
        UID_T,
        'rubric.0.question',
        'Field required',
    ),
    (
        'decision-not-yes-no',
        bad(GOOD_T, ['user', 'decisions'], {'cancel': 'maybe'}),
        1,
        UID_T,
        'user.decisions.cancel',
        'valid boolean',
    ),
    ('duplicate-uid', line(GOOD_T) + line(GOOD_T), 2, UID_T, 'uid', 'duplicate uid (first on line 1)'),
]


@pytest.mark.parametrize('data,line_no,uid,field,message', [pytest.param(*c[1:], id=c[0]) for c in CASES])
def test_broken_file_is_refused_naming_file_line_uid_and_field(tmp_path, data, line_no, uid, field, message):
    path = tmp_path / 'tasks.jsonl'
    path.write_bytes(data)
    with pytest.raises(TaskFileError) as e:
        load_tasks(path)
    hits = [p for p in e.value.problems if message in p.message]
    assert hits, f'no problem says {message!r}: {e.value}'
    p = hits[0]
    assert (p.file, p.line, p.uid) == (str(path), line_no, uid), p
    assert (p.field or '').startswith(field or '') and (field is None) == (p.field is None or field is None), p
    str(e.value).encode('utf-8')  # the error prints, whatever bytes the file held
    assert f'{path}:{line_no}' in str(e.value)


def test_missing_file_and_directory_are_named(tmp_path):
    with pytest.raises(TaskFileError) as e:
        load_tasks(tmp_path / 'nope.jsonl', tmp_path)
    msgs = [str(p) for p in e.value.problems]
    assert msgs == [f'{tmp_path}/nope.jsonl:0: no such file', f'{tmp_path}:0: cannot read: Is a directory'], msgs


def test_duplicate_uid_across_files(tmp_path):
    (tmp_path / 'a.jsonl').write_bytes(line(GOOD_T))
    (tmp_path / 'b.jsonl').write_bytes(line(GOOD_T))
    with pytest.raises(TaskFileError, match=r'b.jsonl:0 \[.*\] uid: duplicate uid \(also in .*a.jsonl\)'):
        load_tasks(tmp_path / 'a.jsonl', tmp_path / 'b.jsonl')


@pytest.mark.parametrize(
    'data',
    [
        pytest.param(b'\xef\xbb\xbf' + line(GOOD_T), id='byte-order-mark'),
        pytest.param(line(GOOD_T).replace(b'\n', b'\r\n') + line(GOOD_R).replace(b'\n', b'\r\n'), id='crlf-line-ends'),
        pytest.param(
            json.dumps(
                changed(GOOD_T, _set(['query'], 'Cancel\u2028my booking\u2029please')), ensure_ascii=False
            ).encode()
            + b'\n',
            id='u2028-inside-a-string',
        ),
        pytest.param(b'\n\n' + line(GOOD_T) + b'   \n', id='blank-lines'),
    ],
)
def test_files_that_must_load(tmp_path, data):
    path = tmp_path / 'tasks.jsonl'
    path.write_bytes(data)
    assert [t.uid for t in load_tasks(path)][0] == UID_T


@pytest.mark.parametrize(
    'change,call',
    [
        pytest.param(
            lambda r: r['golden'][-1]['arguments'].update(email='someone@else.example'),
            'create_return',
            id='golden-wrong-email',
        ),
        pytest.param(
            lambda r: r['golden'][-1]['arguments'].update(order_id='OR-99999999'),
            'create_return',
            id='golden-unknown-order',
        ),
        pytest.param(
            lambda r: r['golden'][-1]['arguments'].update(product_id='PR-0'),
            'create_return',
            id='golden-unknown-product',
        ),
    ],
)
def test_golden_call_that_fails_on_replay_refuses_the_task(tmp_path, change, call):
    "Such a task once loaded fine and its attempts were stored as ok with reward None; now it is refused."
    path = tmp_path / 'tasks.jsonl'
    bad_uid = UID_R + '-bad'
    path.write_bytes(line(GOOD_T) + line(changed(GOOD_R, lambda r: (change(r), r.update(uid=bad_uid)))))
    tasks = load_tasks(path)  # well-formed: the replay is what fails
    with pytest.raises(DefectiveTask) as e:
        check_defects(tasks)
    [problem] = e.value.problems
    assert f'task {bad_uid}: golden[' in problem and f'] {call}(' in problem
    assert check_defects(tasks[:1]) == tasks[:1]
