"""The recorded builds' claims, checked against their records (from nbs/06a_base_policy.ipynb at commit bb066b1,
where this was a notebook cell of `make test`). Run from the project root: `python experiments/base_policy/check_records.py`.
It reads JSON and logs only; it trains nothing."""
import json
from pathlib import Path
from tbt_lab.base_policy import model_dir, report_line
from tbt_lab.policy_report import recorded

BUILDS = Path(__file__).resolve().parent/'builds'
_build, _report, _speed = recorded()

_choice = json.loads((BUILDS/'8a/choice.json').read_text())  # `choice_accuracy(<8a's weights>)`
print('8a:', _choice)
# 8a copied the call's other ids but picked its item at about chance: the choice is what it lacked
assert _choice['others'] > 0.95 and _choice['item'] < _choice['chance'] + 0.15
_runs = {b: json.loads((BUILDS/f'{b}/report.json').read_text()) for b in ('3b', '4a', '4b', '5a', '6a', '7a')}
_r8a = json.loads((BUILDS/'8a/report.json').read_text())  # shipped until 17c
_runs['8a'] = _r8a
print(f"{'family':40}" + ''.join(f'{b:>14}' for b in _runs) + '   (id_copy / success)')
for f in _r8a['families']:
    print(f"{f:40}" + ''.join(f"{r['families'][f]['id_copy']:>8.2f} /{r['families'][f]['success']:>4.2f}" for r in _runs.values()))
for b, r in _runs.items(): print(f'{b:14}', report_line(r), r['id_misses'])
_5a, _7a = _runs['5a'], _runs['7a']
assert _runs['4a']['id_copy'] > _runs['3b']['id_copy'] and _runs['4a']['wellformed'] < 0.95 <= _runs['3b']['wellformed']
assert all(_5a[m] >= _runs['3b'][m] for m in ('wellformed', 'id_copy', 'mixed', 'success'))  # 5a is no worse than 3b on any figure
_items = lambda r: sum(r['id_misses_by_kind']['OI-'].values())
print('missing order-item ids:', {b: r['id_misses_by_kind']['OI-'] for b, r in _runs.items() if 'id_misses_by_kind' in r})
assert _runs['6a']['wellformed'] < 0.95 <= _5a['wellformed'] and _runs['6a']['id_copy'] < _5a['id_copy']  # why 6a was not shipped
assert _items(_5a) > 0.5 * sum(_5a['id_misses'].values())  # order items are most of what 5a misses
# the identifier digit split (7a): copies fixed, calls less often well formed
assert _7a['id_misses']['invented'] < _5a['id_misses']['invented'] / 4 and _7a['id_copy'] > _5a['id_copy']
assert _7a['id_misses_by_kind']['OI-']['another_shown'] > 0.9 * _items(_7a)  # what is left of the items is choice
assert _7a['wellformed'] < 0.95 <= _5a['wellformed']  # why 7a was not shipped
# 8a, shipped: the split and the shuffle meet the well-formed and mixed bars and miss the identifier bar by less than 5a
assert _r8a['wellformed'] >= 0.95 and _r8a['mixed'] > 0.5 and _5a['id_copy'] < _r8a['id_copy'] < 0.90 and _r8a['success'] > _5a['success']
assert _r8a['id_misses']['invented'] < _5a['id_misses']['invented'] / 4
assert _r8a['id_misses_by_kind']['OI-']['another_shown'] > 0.9 * _items(_r8a)  # the shuffle did not fix the choice of item
_s3 = {b: json.loads((BUILDS/f'{b}/report-seed3.json').read_text()) for b in ('5a', '7a', '8a')}
for b, r in _s3.items(): print(f'{b} on --seed 3:', report_line(r), f"success={r['success']:.3f}")
assert _s3['7a']['id_copy'] > _s3['5a']['id_copy'] and _s3['7a']['wellformed'] < 0.95 <= _s3['5a']['wellformed']  # the same on other tasks
_s4 = {b: json.loads((BUILDS/f'{b}/report-seed4.json').read_text()) for b in ('5a', '8a')}
for b, r in _s4.items(): print(f'{b} on --seed 4:', report_line(r), f"success={r['success']:.3f}")
for s in (_s3, _s4):  # 8a against 5a on other fresh tasks: well formed, closer to the identifier bar, more successes
    assert s['8a']['wellformed'] >= 0.95 and s['5a']['id_copy'] < s['8a']['id_copy'] < 0.90 and s['8a']['success'] > s['5a']['success']
# 9a: choice drills did not fix the choice of item, and cost well-formed calls
_9a = json.loads((BUILDS/'9a/report.json').read_text())
print('9a', report_line(_9a), _9a['id_misses_by_kind']['OI-'])
assert _9a['wellformed'] < 0.95 <= _r8a['wellformed'] and _9a['id_copy'] < _r8a['id_copy']
assert _items(_9a) >= 0.9 * _items(_r8a)
_ch = {b: json.loads((BUILDS/f'{b}/choice.json').read_text()) for b in ('8a', '9a')}
print('teacher-forced item choice:', {b: (c['item'], c['chance']) for b, c in _ch.items()})
assert all(abs(c['item'] - c['chance']) < 0.05 and c['others'] > 0.95 for c in _ch.values())
# 10a: with the product as the argument, the named product is still the miss, and a worse one
_10a, _ch10 = (json.loads((BUILDS/f'10a/{f}.json').read_text()) for f in ('report', 'choice'))
print('10a', report_line(_10a), _10a['id_misses_by_kind']['product'], 'teacher-forced named product:', _ch10['item'], 'chance', _ch10['chance'])
assert all(_10a[m] < _r8a[m] for m in ('wellformed', 'id_copy', 'mixed', 'success'))
assert _10a['id_misses_by_kind']['product']['invented'] > 0.5 * sum(_10a['id_misses_by_kind']['product'].values())
assert _ch10['item'] < _ch10['chance'] and _ch10['others'] > 0.95
# 11a: binding drills from the first step left the choice at chance, and the build worse than 8a
_11a, _ch11 = (json.loads((BUILDS/f'11a/{f}.json').read_text()) for f in ('report', 'choice'))
_b11 = json.loads((BUILDS/'11a/build.json').read_text())
print('11a', report_line(_11a), 'teacher-forced item choice:', _ch11['item'], 'chance', _ch11['chance'],
      'binding drills, last token accuracy:', _b11['sft'][-1]['binding_acc'])
assert _b11['config']['binding_drills'] == 8 and abs(_ch11['item'] - _ch11['chance']) < 0.05 and _ch11['others'] > 0.95
assert _b11['sft'][-1]['binding_acc'] < 0.8 + 0.2 * 0.5  # under what copies and a choice right half the time would give
assert _11a['wellformed'] < 0.95 <= _r8a['wellformed'] and _11a['id_copy'] < _r8a['id_copy']
# 12a, 12b: demonstrations that ask which item; the drills learnt the choice, the real cuts did not, the builds fell behind 8a
_b12, _ch12 = (json.loads((BUILDS/f'12a/{f}.json').read_text()) for f in ('build', 'choice'))
_b12b, _ch12b = (json.loads((BUILDS/f'12b/{f}.json').read_text()) for f in ('build', 'choice'))
_b8a = json.loads((BUILDS/'8a/build.json').read_text())
for b, r, c in (('12a', _b12, _ch12), ('12b', _b12b, _ch12b)):
    print(b, 'closing check', report_line(r['check']), 'teacher-forced item choice:', c['item'], 'chance', c['chance'], 'other ids', c['others'])
assert _b12['sft'][-1]['binding_acc'] > 0.95 > 0.8 + 0.2 * 0.5  # well past copies with a choice right half the time
assert _ch12['item'] - _ch12['chance'] < 0.05 and _ch12b['item'] < 0.5 and max(_ch12['others'], _ch12b['others']) < 0.8
assert _b12b['config']['polish_steps'] == 250 and _b12b['polish'][-1]['step'] == 250
assert all(r['check'][m] < _b8a['check'][m] for r in (_b12, _b12b) for m in ('wellformed', 'id_copy', 'success'))
# 13a: word echoes, the question and the think block; products copied, the id after them not, identifiers no better than 8a
_b13, _13a = (json.loads((BUILDS/f'13a/{f}.json').read_text()) for f in ('build', 'report'))
_parts_log = lambda b: {k: float(v) for k, v in zip(*[iter((BUILDS/f'{b}/parts.log').read_text().split('| ')[-1].split())] * 2)}
print('13a', report_line(_13a), _13a['id_misses_by_kind']['OI-'], '|', _parts_log('13a'))
_parts = _parts_log('13a')
assert _parts['think_product'] > 0.6 and _parts['think_id'] < 0.35 and _parts['call_id'] > 0.99
assert _b13['config']['product_echo'] == 0.2 and _b13['config']['think_which'] and _b13['config']['ask_which']
assert _13a['wellformed'] >= 0.95 and _13a['mixed'] > _r8a['mixed'] and _13a['id_copy'] < _r8a['id_copy'] < 0.90
assert _13a['id_misses_by_kind']['OI-']['another_shown'] > _r8a['id_misses_by_kind']['OI-']['another_shown']
# 14a: opaque item ids; the id after the product is not copied at all, and the build is worse than 13a on every figure
_b14 = json.loads((BUILDS/'14a/build.json').read_text())
_t14 = (BUILDS/'14a/id_tokens.log').read_text()
print('14a closing check', report_line(_b14['check']), '|', _t14.strip())
assert all(_b14['check'][m] < _b13['check'][m] for m in ('wellformed', 'id_copy', 'success'))
assert json.loads(_t14.split('in order: ')[1].split(' |')[0])[1:3] == [0.0, 0.0] and '{False: 92}' in _t14
assert _parts_log('14a')['think_id'] == 0.0 and _parts_log('14a')['think_product'] < _parts['think_product']
# 15a: 13a in a bigger model; products no longer copied, identifiers worse than 13a's and 8a's
_b15 = json.loads((BUILDS/'15a/build.json').read_text())
_p15 = _parts_log('15a')
print('15a closing check', report_line(_b15['check']), _b15['model']['parameters'], 'parameters |', _p15)
assert _b15['model']['layers'] == 6 and _b15['model']['kv_heads'] == 6 and _b15['wall_s'] < 90 * 60
assert _b15['check']['id_copy'] < _b13['check']['id_copy'] < _b8a['check']['id_copy'] and _p15['think_product'] < 0.1
# 16a, 16b and 16c: writes by the product id the customer quotes, so no choice is left
_16 = {b: [json.loads((BUILDS/f'{b}/{f}.json').read_text()) for f in ('build', 'report')] for b in ('16a', '16b', '16c')}
for b, (_bj, _r) in _16.items():
    print(b, 'closing check', report_line(_bj['check']), '| report', report_line(_r), f"success={_r['success']:.3f}", 'PR-', _r['id_misses_by_kind']['PR-'])
    assert _bj['tokenizer']['choice_cuts'] == 0 and 'OI-' not in _r['id_misses_by_kind']
(_b16c, _r16c) = _16.pop('16c')
for _bj, _r in _16.values():  # 16a and 16b, the id in the replies too: worse than 8a on every figure
    assert all(_bj['check'][m] < _b8a['check'][m] for m in ('wellformed', 'id_copy', 'success'))
    assert all(_r[m] < _r8a[m] for m in ('wellformed', 'id_copy', 'mixed', 'success'))
    assert _r['id_misses_by_kind']['PR-']['another_shown'] < _r['id_misses_by_kind']['PR-']['not_reached']
assert _16['16b'][0]['config']['seed'] == 1 and _16['16a'][0]['config']['seed'] == 0
# 16c: the id in the customer's messages only; the fall undone (the best closing-check success), two bars still missed
_checks = {p.parent.name: json.loads(p.read_text())['check'] for p in (BUILDS).glob('*/build.json')}
_checks.pop('17c')  # the shipped build, below
_checks.pop('one-run')  # 17c rebuilt in one run (2 December 2026), below
assert _checks.pop('16c')['success'] > max(c['success'] for c in _checks.values())  # the best of every recorded build before 17c
assert _r16c['success'] > max(r['success'] for _, r in _16.values()) and _r16c['mixed'] > _r8a['mixed']
assert _r16c['wellformed'] < 0.95 and _r16c['id_copy'] < _r8a['id_copy'] < 0.90  # why 16c was not shipped
assert _r16c['id_misses_by_kind']['PR-']['not_reached'] > _r16c['id_misses_by_kind']['PR-']['another_shown'] > 0
# 17a-17c: polish passes on more demonstrations; 17c meets every bar on three seeds of fresh tasks and is shipped
_17 = {b: {s: json.loads((BUILDS/f'{b}/{f}.json').read_text()) for s, f in ((2, 'report'), (3, 'report-seed3'), (4, 'report-seed4'))}
       for b in ('8a', '17a', '17b', '17c')}
for b, rs in _17.items(): print(b, *(f"seed {s}: {report_line(r)} success={r['success']:.3f}" for s, r in rs.items()), sep='\n  ')
_b17 = {b: json.loads((BUILDS/f'{b}/build.json').read_text()) for b in ('17a', '17b', '17c')}
print('episode-token loss: 8a last', _b8a['sft'][-1]['episode_loss'], '| 17a pass, first 50 steps', _b17['17a']['polish'][0]['episode_loss'], 'last', _b17['17a']['polish'][-1]['episode_loss'])
assert all(_17['17a'][s][m] > _17['8a'][s][m] for s in (2, 3, 4) for m in ('id_copy', 'success')) and all(r['id_copy'] < 0.90 for r in _17['17a'].values())
_cold = [json.loads((BUILDS/f'17a/report-t{t}.json').read_text()) for t in ('0.8', '0.6')]
print('17a at temperature 1.0, 0.8, 0.6:', [(round(r['wellformed'], 3), r['id_misses_by_kind']['OI-']) for r in [_17['17a'][2], *_cold]])
assert all(r['id_misses_by_kind']['OI-']['another_shown'] >= 40 for r in [_17['17a'][2], *_cold])  # colder sampling does not fix the choice
assert all(_17['17b'][2][m] > _r16c[m] for m in ('wellformed', 'id_copy'))
assert all(r['wellformed'] >= 0.95 and r['id_copy'] >= 0.90 and r['mixed'] > 0.5 for r in _17['17c'].values())  # every bar, on three seeds
assert [r['polish_pass'] for r in _b17['17c']['polish'] if r.get('step') == 600] == [1, 2] and _b17['17c']['wall_s'] < 90 * 60
_sha = (BUILDS/'17b/polish_saved.log').read_text().split()[-3::2]
assert len(_sha) == 2 and _sha[0] == _sha[1]  # `polish_saved` reran 17b's staged pass to the same weights
_same = lambda r: {k: v for k, v in r.items() if k not in ('run', 'wall_s')}
assert _same(_report) == _same(_17['17c'][2]) and _b17['17c'] == _build  # the shipped weights' report and build are 17c's
# the one-run rebuild of 17c (2 December 2026): the same weights, and every logged step but its time
_one = json.loads((BUILDS/'one-run/build.json').read_text())
_steps = lambda rows: [{k: v for k, v in r.items() if k != 's'} for r in rows]
_one_sha = (BUILDS/'one-run/weights_sha256.txt').read_text().split()[0]
_one_report = json.loads((BUILDS/'one-run/report.json').read_text())
assert _one_sha == _one_report['run']['weights_sha256'] == _report['run']['weights_sha256']
assert _steps(_one['sft']) == _steps(_b17['17c']['sft']) and _steps(_one['polish']) == _steps(_b17['17c']['polish'])
print(f"one-run rebuild of 17c: the same weights in {_one['wall_s'] / 60:.1f} min "
      f"(17c in stages: {_b17['17c']['wall_s'] / 60:.1f} min)")
print('every recorded claim holds')
