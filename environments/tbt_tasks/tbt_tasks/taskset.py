"""thinkingbox_training's tasks as a verifiers (0.4) environment.

verifiers loads an environment by the id its user names (`--env.taskset.id tbt-tasks`): it imports the module
`tbt_tasks` and takes the `Taskset`, `Env` and `Harness` subclasses it exports in `__all__`. Here:

- `TbtTaskset` loads task files (our JSON Lines, or ThinkingBox-format modules and test lists) with
  `thinkingbox_training.tasks.load_tasks`; a task that its licence restricts to evaluation (a ThinkingBox release) is
  refused, as in our other adapters.
- `TbtTask.setup` provisions a fresh database for the rollout (a copy of the task's template) and opens the episode's
  tool session on it: a real MCP session by default, as `tbt evaluate` runs.
- `TbtHarness` is the agent's loop: each model turn goes to verifiers' interception endpoint (so verifiers records it)
  through our chat policy, the turn is parsed and its tool calls run through the episode's session, exactly as our
  episode engine does; a segment ends when the agent speaks to the customer.
- `TbtEnv.run` is the conversation: the simulated user (scripted, or an LLM) answers each segment's message through
  verifiers' interaction channel, until the user or the task format's own rules end the episode.
- The reward `verdict` is our grader's verdict on the final state (0 or 1). A system error (a tool that crashed or
  timed out, a user or judge endpoint that failed, a database that could not be provisioned) is raised, never scored:
  verifiers records it as the rollout's error, records no `verdict` reward and marks the trace not ok.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import verifiers.v1 as vf
from pydantic import Field
from verifiers.v1.runtimes import ProgramResult

_TASKS: dict = {}  # task uid -> thinkingbox_training Task, for every task a taskset of this process loaded


class EpisodeSystemError(vf.TaskError):
    """The episode hit an infrastructure failure: it has no verdict (verifiers records the error, no reward). A
    verifiers rollout error, so it keeps its name through verifiers' boundaries (harness, task, env): one retry rule,
    `type = "EpisodeSystemError"`, matches every system error."""


# ---- data, state, config ----


class TbtData(vf.TaskData):
    "One task as the trace records it: its uid, domain and family (the task itself is loaded from the task files)."

    task_uid: str
    domain: str
    family: str = ''
    source: str = ''
    """The task file it was loaded from (absolute): a process that did not load the taskset (an env server that
    receives tasks as data) loads it from there."""


class TbtState(vf.State):
    "The rollout's live episode (database, tool session, conversation); never serialized."

    episode: Any = Field(default=None, exclude=True)


class TbtTaskConfig(vf.TaskConfig):
    "How each rollout runs (`--env.taskset.task.*`)."

    user: str = 'scripted'
    """The simulated user: `scripted` (offline) or `openai:MODEL` (an endpoint at $TBT_USER_BASE_URL)."""
    user_base_url: str | None = None
    """An `openai:` user's endpoint (None: $TBT_USER_BASE_URL)."""
    judge: str = 'rule'
    """The rubric judge: `rule` (offline), `openai:MODEL` (at $TBT_JUDGE_BASE_URL) or `none`."""
    judge_base_url: str | None = None
    """An `openai:` judge's endpoint (None: $TBT_JUDGE_BASE_URL)."""
    tool_transport: str = 'mcp'
    """`mcp` (a real MCP session per rollout, as `tbt evaluate`) or `inprocess` (as training and probing)."""
    tool_timeout_s: float = 10.0
    """Per tool call; past it the rollout is a system error."""
    temperature: float = 1.0
    seed: int = 0
    """Base sampling seed: each turn sends the seed our engine sends (per task, per turn)."""
    max_tokens: int = 0
    """A cap on each turn's tokens below the task's own limit (0: none)."""


class TbtTasksetConfig(vf.TasksetConfig):
    "Which tasks (`--env.taskset.*`)."

    tasks: list[str] = []
    """Task files: JSON Lines, ThinkingBox task modules or test lists (default: the package's bundled bench tasks)."""
    split: str | None = None
    """Keep only the tasks of this split (None: all)."""
    uids: list[str] = []
    """Keep only these task uids, in this order (empty: all)."""
    task: TbtTaskConfig = TbtTaskConfig()


# ---- the episode: our engine's rules, one rollout ----


class _Episode:
    """One rollout's episode as our engine runs it: the database, the tool session (owned by a task of its own, so it
    can be closed from any task), the conversation, the simulated user and the termination."""

    def __init__(self, task, cfg: TbtTaskConfig):
        from thinkingbox_training.episode import protocol_for
        from thinkingbox_training.policies import SamplingConfig

        self.task, self.cfg = task, cfg
        self.protocol = protocol_for(task)
        self.sampling = SamplingConfig(temperature=cfg.temperature, seed=cfg.seed, max_tokens=cfg.max_tokens or 10**9)
        self.seed = self.sampling.attempt_seed(task.uid, 0)
        self.messages, self.tools, self.call_schemas = [], [], None
        self.turns = self.user_turns = self.tool_calls = self.malformed_calls = 0
        self.termination, self.system_error, self.ended = '', None, False
        self.db = self.ts = self.user = self.client = None
        self._closing: asyncio.Event | None = None
        self._owner: asyncio.Task | None = None
        self.t0 = time.perf_counter()

    async def open(self):
        from thinkingbox_training.tasks import get_domain
        from thinkingbox_training.tools import tool_session

        dom = get_domain(self.task.domain)
        self.db = dom.provision(self.task)
        ready, self._closing = asyncio.get_running_loop().create_future(), asyncio.Event()

        async def own():
            try:
                async with tool_session(
                    self.db, timeout_s=self.cfg.tool_timeout_s, transport=self.cfg.tool_transport
                ) as ts:
                    self.ts = ts
                    ready.set_result(await ts.tool_specs())
                    await self._closing.wait()
            except BaseException as e:
                if not ready.done():
                    ready.set_exception(e)
                raise

        self._owner = asyncio.create_task(own())
        session_tools = await ready
        self.messages, self.tools = self.protocol.opening(self.task, dom, session_tools)
        self.call_schemas = self.protocol.call_schemas(self.tools, session_tools)
        kw = {'base_url': self.cfg.user_base_url} if self.cfg.user_base_url and self.cfg.user != 'scripted' else {}
        self.user = self.protocol.make_user(self.cfg.user, self.task, **kw)

    def end(self, termination: str, system_error: str = None):
        "End the episode (the first reason stays); a system error voids it."
        if system_error and not self.system_error:
            self.system_error = system_error
        if not self.ended:
            self.ended, self.termination = True, termination

    async def agent_segment(self, client):
        """Agent turns until the agent speaks to the customer (True: the user replies next) or the episode ends."""
        from thinkingbox_training.interpret import parse_assistant
        from thinkingbox_training.policies import GenRequest

        lim = self.task.limits
        while not self.ended:
            if self.turns >= lim.max_turns:
                self.end('turn_limit')
                break
            if time.perf_counter() - self.t0 > lim.wall_clock_s:
                self.end('wall_clock', f'wall clock: the episode took over its {lim.wall_clock_s:g}s guard')
                break
            mt = min(lim.max_tokens_per_turn, self.sampling.max_tokens)
            req = GenRequest(
                messages=self.messages,
                tools=self.tools,
                task=self.task,
                repetition=0,
                turn=self.turns,
                seed=(self.seed + self.turns) % 2**63,
                max_tokens=mt,
                chat=self.protocol.chat(self.task, self.sampling, mt),
                key=self.task.uid,  # one client an episode: it sends each call back with the id and text it gave
            )
            try:
                g = (await client.generate([req]))[0]
            except Exception as e:
                self.end('system_error', f'policy failed: {type(e).__name__}: {e}')
                break
            self.turns += 1
            turn = parse_assistant(g.text, self.ts.parse_schemas(self.call_schemas or self.tools))
            self.messages.append(turn.message)
            if g.finish == 'length':
                self.end('token_limit')
                break
            if not (turn.tool_calls or turn.errors):
                if self.protocol.agent_done(turn.message):
                    self.end('agent_done')
                    break
                return True
            if any(c.name in self.protocol.end_turn_tools for c in turn.tool_calls):
                self.end('end_turn_tool')
                break
            obs = []
            for call in turn.tool_calls:
                r = await self.ts.call(call.name, call.arguments)
                self.tool_calls += 1
                if r.system_error:
                    self.end('system_error', r.system_error)
                    return False
                obs.append(r.message())
            self.malformed_calls += len(turn.errors)
            self.messages += obs + [e.as_tool_message() for e in turn.errors]
        return False

    async def user_reply(self) -> str | None:
        "The simulated user's answer to the agent's last message; None when the user (or the protocol) ends it."
        from thinkingbox_training.users import UserEndpointError

        p = self.protocol
        if not p.has_user(self.task):
            self.end('no_user')
            return None
        if p.max_user_turns is not None and self.user_turns >= p.max_user_turns:
            self.end('max_user_turns')
            return None
        self.user_turns += 1
        try:
            ut = await self.user.reply(p.user_view(self.messages))
        except UserEndpointError as e:
            self.end('system_error', str(e))
            return None
        if ut.stop:
            self.end(ut.reason)
            return None
        return ut.text

    @property
    def final_message(self) -> str:
        return next(
            (
                m.get('content') or ''
                for m in reversed(self.messages)
                if m['role'] == 'assistant' and not m.get('tool_calls')
            ),
            '',
        )

    async def verdict(self):
        "Our grader's verdict on the final state; raises `EpisodeSystemError` when there is none to give."
        from thinkingbox_training.campaigns import make_judge
        from thinkingbox_training.episode import EpisodeProtocol
        from thinkingbox_training.grader import Grader, expected_state
        from thinkingbox_training.users import visible_messages

        if self.system_error:
            raise EpisodeSystemError(self.system_error)
        try:
            await asyncio.to_thread(expected_state, self.task)
            p = self.protocol
            own = type(p).judge_request is not EpisodeProtocol.judge_request
            return await Grader(judge=make_judge(self.cfg.judge, base_url=self.cfg.judge_base_url)).grade(
                self.task,
                self.db,
                self.final_message,
                visible_messages(self.messages),
                **({'judge_request': p.judge_request} if own else {}),
            )
        except Exception as e:
            self.end('system_error', f'grading failed: {type(e).__name__}: {e}'[:2000])
            raise EpisodeSystemError(self.system_error) from None

    async def close(self):
        if self._closing is not None:
            self._closing.set()
            try:
                await self._owner
            except BaseException:
                pass
            self._closing = None
        if self.db is not None:
            self.db.close()
            self.db = None


# ---- verifiers' parts ----


class TbtTask(vf.Task[TbtData, TbtState, TbtTaskConfig]):
    "One of our tasks: a fresh database at setup, our verdict as the reward."

    @property
    def key(self) -> str:
        return self.data.task_uid

    async def setup(self, trace: vf.Trace, runtime) -> None:
        task = _TASKS.get(self.data.task_uid)
        if task is None and self.data.source:  # tasks shipped as data: load them from their file here
            from thinkingbox_training.tasks import load_tasks

            _TASKS.update({t.uid: t for t in await asyncio.to_thread(load_tasks, self.data.source)})
            task = _TASKS.get(self.data.task_uid)
        if task is None:
            raise KeyError(f'task {self.data.task_uid}: not in {self.data.source or "the tasks this process loaded"}')
        ep = _Episode(task, self.config)
        trace.state.episode = ep
        try:
            await ep.open()
        except Exception as e:
            ep.end('system_error', f'provisioning failed: {type(e).__name__}: {e}')
            raise EpisodeSystemError(ep.system_error) from e

    @vf.reward
    async def verdict(self, trace: vf.Trace) -> float:
        "1.0 when the final state (and the rubric) pass, 0.0 when not; a system error raises (no reward)."
        ep = trace.state.episode
        if ep is None:
            raise EpisodeSystemError('the rollout has no episode (setup failed)')
        try:
            v = await ep.verdict()
        finally:
            trace.info['tbt'] = _summary(ep)
            await ep.close()
        trace.info['tbt']['reasons'] = list(v.reasons[:20])
        return float(v.reward)


def _summary(ep: _Episode) -> dict:
    return {
        'task_uid': ep.task.uid,
        'termination': ep.termination or 'user_closed',
        'system_error': ep.system_error,
        'turns': ep.turns,
        'tool_calls': ep.tool_calls,
        'malformed_calls': ep.malformed_calls,
        'messages': [m for m in ep.messages if m.get('role') != 'system'],
    }


class TbtHarnessConfig(vf.HarnessConfig):
    pass


class TbtHarness(vf.Harness[TbtHarnessConfig]):
    """The agent's loop, in process: our chat policy pointed at verifiers' interception endpoint, our parser, the
    episode's tool session. A segment runs until the agent speaks to the customer or the episode ends."""

    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_RESUME = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(self, ctx, trace, runtime, endpoint, secret, mcp_urls, data, **kw) -> ProgramResult:
        from thinkingbox_training.policies import ChatEndpointPolicy

        ep: _Episode = trace.state.episode
        if ep.client is None:  # kept over the episode's segments, as `tbt evaluate` keeps one policy an episode
            ep.client = ChatEndpointPolicy(ctx.model, base_url=endpoint, api_key=secret, sampling=ep.sampling)
        await ep.agent_segment(ep.client)
        if ep.system_error:
            raise EpisodeSystemError(ep.system_error)
        return ProgramResult(exit_code=0, stdout='', stderr='')

    async def resume(self, ctx, trace, runtime, endpoint, secret, mcp_urls, data, messages, *a, **kw):
        "The user's reply joins our conversation (verifiers' trace records it from the next request)."
        ep: _Episode = trace.state.episode
        for m in messages:
            ep.messages.append({'role': 'user', 'content': m.content if isinstance(m.content, str) else str(m.content)})
        return await self.launch(ctx, trace, runtime, endpoint, secret, mcp_urls, data)

    async def cleanup(self, trace, runtime) -> None:
        "After scoring (or after an error, when none ran): the episode's summary on the trace, its database closed."
        ep = trace.state.episode
        if ep is not None:
            trace.info.setdefault('tbt', _summary(ep))
            await ep.close()


class TbtEnvConfig(vf.EnvConfig):
    agent: vf.AgentConfig = vf.AgentConfig(runtime={'type': 'subprocess'})
    """The policy under evaluation or training (`--env.agent.*`). Its harness runs in process and runs no program,
    so the runtime is the local subprocess one (verifiers' default is a remote sandbox)."""


class TbtEnv(vf.Env[TbtEnvConfig]):
    """The conversation: the agent's segment, then the simulated user's reply through verifiers' interaction, until
    the user or the task format's rules end the episode."""

    async def run(self, task, agents) -> None:
        async with agents.agent.interaction(task) as it:
            ep: _Episode = it.trace.state.episode
            seg = await it.turn()
            while not seg.terminated and not ep.ended:
                reply = await ep.user_reply()
                if ep.system_error:
                    raise EpisodeSystemError(ep.system_error)
                if reply is None:
                    break
                seg = await it.turn(reply)


class TbtTaskset(vf.Taskset[TbtTask, TbtTasksetConfig]):
    "Our task files as verifiers tasks; evaluation-only tasks are refused."

    def load(self) -> list[TbtTask]:
        from thinkingbox_training.cli import data_path
        from thinkingbox_training.tasks import TaskFileError, load_tasks, refuse_evaluation_only

        files = self.config.tasks or [str(data_path('tasks') / f) for f in ('retail_bench.jsonl', 'travel_bench.jsonl')]
        files = [str(Path(f).resolve()) for f in files]
        try:  # each file read once, so that each task's data names its file
            per_file = [(f, load_tasks(f)) for f in files]
        except TaskFileError:
            per_file = None
        uids = [t.uid for _, ts in per_file or [] for t in ts]
        if per_file is None or len(set(uids)) < len(uids):  # a bad file, or a uid in two: every problem of every file
            tasks = load_tasks(*files)  # raises, naming them all (a ThinkingBox uid may repeat: then as loaded)
        else:
            tasks = [t for _, ts in per_file for t in ts]
        source = {t.uid: f for f, ts in per_file for t in ts}
        if self.config.split:
            tasks = [t for t in tasks if t.split == self.config.split]
        if self.config.uids:
            by = {t.uid: t for t in tasks}
            missing = [u for u in self.config.uids if u not in by]
            if missing:
                raise ValueError(f'env.taskset.uids: {missing[0]} is not in {", ".join(files)}')
            tasks = [by[u] for u in self.config.uids]
        refuse_evaluation_only(tasks, 'a verifiers environment')
        out = []
        for t in tasks:
            _TASKS[t.uid] = t
            out.append(
                TbtTask(
                    TbtData(
                        id=t.uid,
                        name=t.uid,
                        prompt=t.query,
                        task_uid=t.uid,
                        domain=t.domain,
                        family=t.family,
                        source=source[t.uid],
                    ),
                    self.config.task,
                )
            )
        return out
