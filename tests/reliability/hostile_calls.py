"""Hostile tool calls, written once, that every transport and adapter is run through.

Whatever a policy writes is its own failed call, never a system error: a text it reads, the episode going on to its
verdict, nothing committed. This module holds the calls and a small domain to make them on:

- `HOSTILE`: a list of `HostileCall(id, tool, arguments, wire)`. `arguments` is what the caller hands over (built
  on access: some are nested thousands deep or contain themselves); `wire` is False where no JSON client can send it
  (a value JSON has no form for, a value that contains itself, arguments that are not an object): only in-process
  callers (the episode engine, the TRL adapter) meet those. `RESERVED` are ThinkingBox's reserved tools (any name
  starting with `RESERVED_PREFIX`): never listed, every call of one the agent's failed call.
- `DOMAIN` ('hostile'): registered on import. `add_note(text)` writes a row; `store(data: object)` takes any JSON
  object; `raises(text)` and `exits(code)` write a row, then raise `RuntimeError` or call `sys.exit`; `hang(seconds)`
  writes a row, then waits for `RELEASE` (at most `seconds`); `user`, `tasks`, `task` and `domain` are tools named
  like an environment's own attributes. `TASK` is one task of it (its golden call: `add_note('hello')`).
- `check_failed(case, text, is_error, system_error)`: the assertion every transport makes of one answer;
  `NOTES` reads the rows a backend holds (after any hostile call: none).

A transport's test: for each case it can carry, make the call, `check_failed` its answer, then check that nothing
was written and that a good call still succeeds.
"""

from __future__ import annotations
import sys, threading
from dataclasses import dataclass
from typing import Any, Optional
from sqlalchemy.orm import registry
from sqlmodel import Field, SQLModel
from thinkingbox_training.backend import Domain
from thinkingbox_training.tasks import Task, ToolCallSpec, get_domain


class HostileBase(SQLModel, registry=registry()):
    pass


class Note(HostileBase, table=True):
    __tablename__ = 'note'
    id: Optional[int] = Field(default=None, primary_key=True)
    text: str


RELEASE = threading.Event()  # `hang` waits for it
NAMED_LIKE_ATTRIBUTES = ('user', 'tasks', 'task', 'domain')


def _make_domain() -> Domain:
    try:
        return get_domain('hostile')  # imported twice (as a test module and by path): one domain
    except Exception:
        pass
    dom = Domain('hostile', HostileBase, seed=lambda: {'note': []}, policy='Note what the customer asks.')

    def write(ctx, text):
        ctx.session.add(Note(text=text))
        ctx.session.flush()

    @dom.tool
    def add_note(ctx, text: str) -> dict:
        "Keep a note."
        write(ctx, text)
        return {'ok': True}

    @dom.tool
    def store(ctx, data: dict) -> dict:
        "Keep any JSON object (its keys are counted)."
        return {'keys': len(data)}

    @dom.tool
    def raises(ctx, text: str = 'x') -> dict:
        "Write a note, then fail with a bug."
        write(ctx, text)
        raise RuntimeError('a bug the arguments trigger')

    @dom.tool
    def exits(ctx, code: int = 3) -> dict:
        "Write a note, then end the process."
        write(ctx, 'exits')
        sys.exit(code)

    @dom.tool
    def hang(ctx, seconds: float = 30.0) -> dict:
        "Write a note, then wait (until released, at most `seconds`)."
        write(ctx, 'hang')
        RELEASE.wait(seconds)
        return {'ok': True}

    def named_tool(name):
        def named(ctx) -> str:
            return f'the {name} tool'

        named.__name__, named.__doc__ = name, f'A tool named {name}.'
        return named

    for name in NAMED_LIKE_ATTRIBUTES:
        dom.tool(named_tool(name))
    return dom


DOMAIN = _make_domain()
TASK = Task(
    uid='hostile/note',
    domain='hostile',
    family='note',
    split='train',
    query='Please note: hello.',
    golden=[ToolCallSpec(name='add_note', arguments={'text': 'hello'})],
    reply='Noted.',
)
GOOD = ('add_note', {'text': 'hello'})  # a good call, made after the hostile ones


def nested(depth: int, leaf: Any = 1) -> dict:
    "An object `depth` levels deep: {'a': {'a': ... leaf}}."
    v = leaf
    for _ in range(depth):
        v = {'a': v}
    return v


def _cycle() -> dict:
    d: dict = {}
    d['self'] = d
    return d


@dataclass(frozen=True)
class HostileCall:
    id: str
    tool: str
    make: Any  # () -> the arguments as the caller hands them over
    wire: bool = True  # JSON can carry it: every transport meets it

    @property
    def arguments(self):
        return self.make()


RESERVED_PREFIX = '__reserved__'  # ThinkingBox's servers: every tool so named is reserved
RESERVED = ('__reserved__init', '__reserved__geteffects', '__reserved__setstate', '__reserved__')

HOSTILE = [
    HostileCall('string_for_int', 'exits', lambda: {'code': 'three'}),
    HostileCall('int_for_string', 'add_note', lambda: {'text': 5}),
    HostileCall('bool_for_string', 'add_note', lambda: {'text': True}),
    HostileCall('list_for_string', 'add_note', lambda: {'text': ['hello']}),
    HostileCall('null_for_string', 'add_note', lambda: {'text': None}),
    HostileCall('missing_argument', 'add_note', lambda: {}),
    HostileCall('extra_argument', 'add_note', lambda: {'text': 'hello', 'extra': 1}),
    HostileCall('argument_named_self', 'add_note', lambda: {'text': 'hello', 'self': 1}),
    HostileCall('argument_named_ctx', 'add_note', lambda: {'text': 'hello', 'ctx': 1}),
    HostileCall('unknown_tool', 'no_such_tool', lambda: {}),
    *[HostileCall(f'reserved{n}', n, lambda: {}) for n in RESERVED],
    HostileCall('reserved_with_arguments', '__reserved__init', lambda: {'config': {'note': [{'text': 'forged'}]}}),
    HostileCall('nested_300', 'store', lambda: {'data': nested(300)}),
    HostileCall('nested_3000', 'store', lambda: {'data': nested(3000)}),
    HostileCall('nested_list_300', 'store', lambda: {'data': {'a': nested(300, [])}}),
    HostileCall('nested_in_extra_300', 'add_note', lambda: {'text': 'hello', 'extra': nested(300)}),
    HostileCall('tool_raises', 'raises', lambda: {'text': 'boom'}),
    HostileCall('tool_exits', 'exits', lambda: {'code': 3}),
    HostileCall('tool_exits_zero', 'exits', lambda: {'code': 0}),
    HostileCall('set_value', 'store', lambda: {'data': {'k': {1, 2}}}, wire=False),
    HostileCall('object_value', 'store', lambda: {'data': {'k': object()}}, wire=False),
    HostileCall('bytes_value', 'add_note', lambda: {'text': b'hello'}, wire=False),
    HostileCall('int_key', 'store', lambda: {'data': {1: 'x'}}, wire=False),
    HostileCall('contains_itself', 'store', lambda: {'data': _cycle()}, wire=False),
    HostileCall('arguments_a_list', 'add_note', lambda: ['hello'], wire=False),
    HostileCall('arguments_none', 'add_note', lambda: None, wire=False),
]
CASES = {c.id: c for c in HOSTILE}
WIRE = [c.id for c in HOSTILE if c.wire]


def check_failed(case: HostileCall, text: str, is_error: bool, system_error=None):
    "One answer to a hostile call: the agent's failed call, a text naming the tool, never a system error."
    assert is_error, (case.id, text[:300])
    assert system_error is None, (case.id, system_error)
    assert isinstance(text, str) and text.strip(), (case.id, text)
    assert case.tool in text or 'tool' in text.lower(), (case.id, text[:300])
    assert len(text) < 4000, (case.id, len(text))


def to_json(value) -> str:
    "JSON text of a value of dicts, lists and scalars however deep (`json.dumps` recurses and stops near 1000)."
    import json

    out, stack = [], [value]
    while stack:
        v = stack.pop()
        if isinstance(v, _Text):
            out.append(v)
        elif isinstance(v, dict):
            parts = [_Text('}')]
            for i, (k, x) in enumerate(reversed(list(v.items()))):
                parts += [x, _Text(json.dumps(k) + ': ')] + ([_Text(', ')] if i < len(v) - 1 else [])
            stack += parts + [_Text('{')]
        elif isinstance(v, list):
            parts = [_Text(']')]
            for i, x in enumerate(reversed(v)):
                parts += [x] + ([_Text(', ')] if i < len(v) - 1 else [])
            stack += parts + [_Text('[')]
        else:
            out.append(json.dumps(v))
    return ''.join(out)


class _Text(str):
    pass


def call_text(case: HostileCall) -> str:
    "The call as a model writes it (Qwen3's format), for episodes whose policy writes text."
    return '<tool_call>\n{"name": "%s", "arguments": %s}\n</tool_call>' % (case.tool, to_json(case.arguments))


def notes(db) -> list:
    "The notes a backend of the domain holds."
    return [r['text'] for r in db.snapshot()['note']]


# The calls as a model writes them, for adapters whose policy is a text endpoint (the verifiers environment plays them
# on one of its own tasks, where the hostile domain's tools are unknown tools: still only the agent's failed calls).
HOSTILE_CALLS = [call_text(CASES[c]) for c in WIRE]
