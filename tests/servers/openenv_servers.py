"""Real OpenEnv servers for the tests and benchmarks, built with the ``openenv`` package.

Each server is OpenEnv's own ``HTTPEnvServer`` (the code behind ``create_app``)
on FastAPI + uvicorn, bound to 127.0.0.1 on an ephemeral port:

- ``tictactoe``: tic-tac-toe over pyspiel with OpenEnv's openspiel schema
  (action ``{action_id, game_name, game_params}``, observation ``{info_state,
  legal_actions, game_phase, current_player_id, opponent_last_action}``), a random
  opponent seeded by the reset seed (OpenEnv's reset honours ``seed``).
- ``reasoning_gym``: OpenEnv's reasoning_gym server (reset ``{dataset_name,
  dataset_config, seed, size}``, action ``{answer}``, observation ``{question,
  score, correct_answer, dataset_metadata}``).
- ``echo``: an env the plugin has no adapter for (the generic family's target):
  say the target word back.
- ``openspiel``: OpenEnv's own openspiel server as deployed: any game (``game``
  option, default catch) through ``rl_environment``, ``reset()`` that takes no
  seed (OpenEnv's server drops it) and an unseeded random opponent, so two resets
  with one seed may differ; observations carry only the ``info_state`` tensor.
- ``silent_tictactoe``: ``tictactoe`` whose state names no game (a server that
  cannot say what it hosts). The ``openspiel`` kind takes ``game_params`` too.
- ``guess_number``: a number to guess kept only in the state, drawn whatever the reset
  seed (OpenEnv's TextArena server where it drops the seed); ``echo_mcp``: OpenEnv's echo
  env (MCP tools, an error result for a failed call, ``metadata.status: "ready"``, never
  done); ``browser``: an action that fails comes back as ``last_action_error`` (BrowserGym);
  ``broken_reset``: a server whose every reset fails.
- ``maze``: a generic env whose observation ``metadata`` carries the layout (as
  OpenEnv's maze env does), and ``mcp_echo``: an MCP-style env (actions
  ``list_tools`` / ``call_tool``) whose tool names come from the server.
- ``grid_world``: step penalties before a +1 goal, and a reset that drops every field
  (OpenEnv's grid_world env); ``status_maze``: the outcome in ``metadata.status``
  (its maze env); ``take_away``: an illegal-move penalty, a result stated in the state
  and a ``fen`` reset field the state rewrites (its chess env); ``session_seeded``: an
  RNG seeded once per session, whatever the reset seed; ``snake``: a fruit scores 1, a step
  alive 0.001, dying -1, and only dying ends the episode (its snake env).

``max_sessions`` caps concurrent WebSocket sessions (``CAPACITY_REACHED`` past
it) and ``step_delay`` slows each step, so sessions overlap. ``GET /test/stats``
reports sessions opened and refused.

Run in a thread (``serve_in_thread``) or as a process that can be killed
(``ServerProcess``; ``python openenv_servers.py KIND [--max-sessions N]
[--step-delay S]``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from openenv.core.env_server.exceptions import SessionCapacityError
from openenv.core.env_server.http_server import HTTPEnvServer
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State
from pydantic import BaseModel, Field

KINDS = (
    "guess_number",
    "echo_mcp",
    "browser",
    "broken_reset",
    "tictactoe",
    "reasoning_gym",
    "echo",
    "openspiel",
    "maze",
    "mcp_echo",
    "silent_tictactoe",
    "reset_task",
    "arena",
    "endless",
    "puzzle",
    "grid_world",
    "status_maze",
    "take_away",
    "session_seeded",
    "snake",
)


# -- tic-tac-toe with OpenEnv's openspiel schema ------------------------------------------
class OpenSpielAction(Action):
    """Action for OpenSpiel environments.

    Attributes:
        action_id: The integer action ID to take (from legal_actions).
        game_name: Name of the OpenSpiel game (e.g., "catch", "tic_tac_toe").
        game_params: Optional game-specific parameters (e.g., {"rows": 8, "columns": 6}).
    """

    action_id: int = Field(..., description="The id of a legal action")
    game_name: str = Field(default="tic_tac_toe", description="OpenSpiel game name")
    game_params: dict[str, Any] = Field(default_factory=dict, description="Game parameters")


class OpenSpielObservation(Observation):
    info_state: list[float] = Field(default_factory=list)
    legal_actions: list[int] = Field(default_factory=list)
    game_phase: str = "playing"
    current_player_id: int = 0
    opponent_last_action: int | None = None


class OpenSpielState(State):
    game_name: str = "tic_tac_toe"
    agent_player: int = 0
    opponent_policy: str = "random"
    game_params: dict[str, Any] = Field(default_factory=dict)
    num_players: int = 2


class TicTacToeEnvironment(Environment):
    """The agent is player 0 against a random opponent seeded by the reset seed."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, step_delay: float = 0.0) -> None:
        super().__init__()
        import pyspiel

        self._game = pyspiel.load_game("tic_tac_toe")
        self._step_delay = step_delay
        self._pyspiel_state: Any = None
        self._rng = random.Random()
        self._last_opponent: int | None = None
        self._moves = 0
        self._state = OpenSpielState()

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> OpenSpielObservation:
        self._rng = random.Random(f"opponent:{seed}") if seed is not None else random.Random()
        self._pyspiel_state = self._game.new_initial_state()
        self._last_opponent = None
        self._moves = 0
        self._state = OpenSpielState(episode_id=episode_id, step_count=0)
        self._play_opponent()
        return self._observe()

    def step(
        self, action: Action, timeout_s: float | None = None, **kwargs: Any
    ) -> OpenSpielObservation:
        if self._step_delay:
            time.sleep(self._step_delay)
        assert isinstance(action, OpenSpielAction)
        state = self._pyspiel_state
        if state is None:
            raise RuntimeError("step before reset")
        if state.is_terminal():
            raise ValueError("the game is over")
        legal = state.legal_actions(0)
        if action.action_id not in legal:
            raise ValueError(f"action_id {action.action_id} is not legal; legal: {legal}")
        state.apply_action(action.action_id)
        self._moves += 1
        self._state.step_count += 1
        self._play_opponent()
        return self._observe()

    def _play_opponent(self) -> None:
        state = self._pyspiel_state
        while not state.is_terminal() and state.current_player() != 0:
            move = self._rng.choice(state.legal_actions(state.current_player()))
            self._last_opponent = move
            state.apply_action(move)

    def _observe(self) -> OpenSpielObservation:
        state = self._pyspiel_state
        done = bool(state.is_terminal())
        phase = "terminal" if done else ("initial" if self._moves == 0 else "playing")
        return OpenSpielObservation(
            info_state=[float(x) for x in state.observation_tensor(0)],
            legal_actions=[] if done else list(state.legal_actions(0)),
            game_phase=phase,
            current_player_id=int(state.current_player()),
            opponent_last_action=self._last_opponent,
            done=done,
            reward=float(state.returns()[0]) if done else 0.0,
        )

    @property
    def state(self) -> OpenSpielState:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="openspiel_env", description="OpenSpiel tic_tac_toe", version="test"
        )


# -- reasoning_gym, as OpenEnv's reasoning_gym server ---------------------------------------
class ReasoningGymAction(Action):
    answer: str = Field(..., description="The agent's answer to the current question")


class ReasoningGymObservation(Observation):
    question: str | None = None
    score: float | None = None
    correct_answer: str | None = None
    dataset_metadata: dict[str, Any] | None = None


class ReasoningGymEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, step_delay: float = 0.0) -> None:
        super().__init__()
        self._dataset: Any = None
        self._iterator: Any = None
        self._entry: dict[str, Any] | None = None
        self._step_delay = step_delay
        self._state = State()

    def reset(
        self,
        dataset_name: str | None = None,
        dataset_config: dict[str, Any] | None = None,
        seed: int | None = None,
        size: int | None = None,
        episode_id: str | None = None,
    ) -> ReasoningGymObservation:
        import reasoning_gym

        if dataset_name is not None:
            if seed is None or size is None:
                raise ValueError("seed and size must be provided when dataset_name is specified")
            self._dataset = reasoning_gym.create_dataset(
                dataset_name, size=size, seed=seed, **(dataset_config or {})
            )
            self._iterator = iter(self._dataset)
        if self._dataset is None:  # as OpenEnv's: reset without a dataset serves leg_counting
            self._dataset = reasoning_gym.create_dataset("leg_counting", size=100, seed=42)
            self._iterator = iter(self._dataset)
        try:
            self._entry = next(self._iterator)
        except StopIteration:
            self._iterator = iter(self._dataset)
            self._entry = next(self._iterator)
        self._state = State(episode_id=episode_id, step_count=0)
        return ReasoningGymObservation(question=self._entry["question"], done=False, reward=0.0)

    def step(
        self, action: Action, timeout_s: float | None = None, **kwargs: Any
    ) -> ReasoningGymObservation:
        if self._step_delay:
            time.sleep(self._step_delay)
        assert isinstance(action, ReasoningGymAction)
        self._state.step_count += 1
        if self._entry is None:
            return ReasoningGymObservation(done=True, reward=0.0)
        score = float(self._dataset.score_answer(action.answer, self._entry))
        metadata = json.loads(json.dumps(self._entry.get("metadata") or {}, default=str))
        return ReasoningGymObservation(
            score=score,
            correct_answer=str(self._entry["answer"]),
            dataset_metadata=metadata or None,
            done=True,
            reward=score,
        )

    @property
    def state(self) -> State:
        return self._state


# -- echo: an env no adapter knows ---------------------------------------------------------
WORDS = ("apple", "river", "cobalt", "meadow", "lantern", "quartz", "harbor", "saffron")


class EchoAction(Action):
    message: str = Field(..., description="The word to say")


class EchoObservation(Observation):
    target: str = ""
    echoed: str | None = None
    attempts: int = 0


class EchoEnvironment(Environment):
    """Say the target word: reward 1 and done when you do; three tries."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    MAX_ATTEMPTS = 3

    def __init__(self, step_delay: float = 0.0) -> None:
        super().__init__()
        self._target = WORDS[0]
        self._attempts = 0
        self._step_delay = step_delay
        self._state = State()

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> EchoObservation:
        self._target = random.Random(seed).choice(WORDS)
        self._attempts = 0
        self._state = State(episode_id=episode_id, step_count=0)
        return EchoObservation(target=self._target, done=False, reward=0.0)

    def step(
        self, action: Action, timeout_s: float | None = None, **kwargs: Any
    ) -> EchoObservation:
        if self._step_delay:
            time.sleep(self._step_delay)
        assert isinstance(action, EchoAction)
        self._attempts += 1
        self._state.step_count += 1
        hit = action.message.strip() == self._target
        return EchoObservation(
            target=self._target,
            echoed=action.message,
            attempts=self._attempts,
            done=hit or self._attempts >= self.MAX_ATTEMPTS,
            reward=1.0 if hit else 0.0,
        )

    @property
    def state(self) -> State:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="echo_env", description="Say the target word back.", version="test"
        )


# -- OpenEnv's openspiel server as deployed: no seed, info_state only ----------------------
class DeployedOpenSpielEnvironment(Environment):
    """Like OpenEnv's ``OpenSpielEnvironment``: ``reset()`` has no seed parameter, so
    OpenEnv's server drops the seed a client sends; chance and the random opponent are
    unseeded. Its state names the game, its params, the agent player and the opponent
    policy (``OPENSPIEL_OPPONENT_POLICY``: random, first, last), but only in the session's
    ``state`` frame: OpenEnv's app is made without a state class, so ``GET /state``
    answers with the base ``State`` fields alone."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(
        self,
        step_delay: float = 0.0,
        game: str = "catch",
        game_params: dict | None = None,
        opponent_policy: str = "random",
        agent_player: int = 0,
        reset_delay: float = 0.0,
        board_log: list[dict[str, str]] | None = None,
    ) -> None:
        super().__init__()
        from open_spiel.python import rl_environment

        #: pyspiel's own strings of every position the agent is shown (a test's list)
        self._board_log = board_log
        self._game_params = dict(game_params or {})
        self._env = rl_environment.Environment(game, **self._game_params)
        self._game_name = game
        self._players = self._env.num_players
        self._agent = agent_player
        self._opponent_policy = opponent_policy
        self._reset_delay = reset_delay
        self._rng = random.Random()  # unseeded, as OpenEnv's random opponent
        self._last_opponent: int | None = None
        self._time_step: Any = None
        self._state = self._fresh_state()

    def _fresh_state(self) -> OpenSpielState:
        return OpenSpielState(
            game_name=self._game_name,
            game_params=self._game_params,
            num_players=self._players,
            agent_player=self._agent,
            opponent_policy=self._opponent_policy,
        )

    def reset(self) -> OpenSpielObservation:  # type: ignore[override]
        if self._reset_delay:
            time.sleep(self._reset_delay)
        self._last_opponent = None
        self._state = self._fresh_state()
        self._time_step = self._opponents(self._env.reset())
        return self._observe()

    def step(
        self, action: Action, timeout_s: float | None = None, **kwargs: Any
    ) -> OpenSpielObservation:
        assert isinstance(action, OpenSpielAction)
        legal = self._time_step.observations["legal_actions"][self._agent]
        if action.action_id not in legal:
            raise ValueError(f"action_id {action.action_id} is not legal; legal: {legal}")
        self._state.step_count += 1
        self._time_step = self._opponents(self._env.step([action.action_id]))
        return self._observe()

    def _opponents(self, time_step: Any) -> Any:
        while self._players > 1 and not time_step.last():
            player = time_step.observations["current_player"]
            if player == self._agent:
                break
            legal = time_step.observations["legal_actions"][player]
            if self._opponent_policy == "first":
                move = legal[0]
            elif self._opponent_policy == "last":
                move = legal[-1]
            elif self._opponent_policy == "middle":  # as OpenEnv's FixedActionOpponent
                move = legal[len(legal) // 2]
            else:
                move = self._rng.choice(legal)
            self._last_opponent = move
            time_step = self._env.step([move])
        return time_step

    def _observe(self) -> OpenSpielObservation:
        time_step = self._time_step
        if self._board_log is not None:
            state = self._env.get_state
            info = ""
            if self._env.game.get_type().provides_information_state_string:
                info = state.information_state_string(self._agent)
            self._board_log.append({"string": str(state), "information_state": info})
        phase = "terminal" if time_step.last() else "initial" if time_step.first() else "playing"
        reward = None if time_step.rewards is None else float(time_step.rewards[self._agent])
        return OpenSpielObservation(
            info_state=[float(x) for x in time_step.observations["info_state"][self._agent]],
            legal_actions=list(time_step.observations["legal_actions"][self._agent]),
            game_phase=phase,
            current_player_id=int(time_step.observations["current_player"]),
            opponent_last_action=self._last_opponent,
            done=bool(time_step.last()),
            reward=reward,
        )

    @property
    def state(self) -> OpenSpielState:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        # what OpenEnv's default gives its OpenSpielEnvironment: the class name, and filler
        return EnvironmentMetadata(
            name="OpenSpielEnvironment",
            description="OpenSpielEnvironment environment",
            version="1.0.0",
        )


# -- maze: what a generic env keeps in the observation's metadata ---------------------------
MAZE = ("#####", "#S..#", "#.#.#", "#..G#", "#####")
MOVES = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}


class MazeAction(Action):
    direction: str = Field(..., description="up, down, left or right")


class MazeObservation(Observation):
    position: list[int] = Field(default_factory=list)


class MazeEnvironment(Environment):
    """Reach G; the layout travels only in the observation's ``metadata``."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, step_delay: float = 0.0) -> None:
        super().__init__()
        self._position = [1, 1]
        self._state = State()

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> MazeObservation:
        self._position = [1, 1]
        self._state = State(episode_id=episode_id, step_count=0)
        return self._observe(done=False, reward=0.0)

    def step(
        self, action: Action, timeout_s: float | None = None, **kwargs: Any
    ) -> MazeObservation:
        assert isinstance(action, MazeAction)
        dr, dc = MOVES.get(action.direction, (0, 0))
        row, col = self._position[0] + dr, self._position[1] + dc
        if MAZE[row][col] != "#":
            self._position = [row, col]
        goal = MAZE[row][col] == "G"
        return self._observe(done=goal, reward=1.0 if goal else 0.0)

    def _observe(self, *, done: bool, reward: float) -> MazeObservation:
        return MazeObservation(
            position=list(self._position),
            done=done,
            reward=reward,
            metadata={"layout": list(MAZE), "legend": "# wall, S start, G goal"},
        )

    @property
    def state(self) -> State:
        return self._state


# -- an MCP-style env: tools listed by the server, called through one action ----------------
class McpAction(Action):
    type: str = Field(..., description="list_tools or call_tool")
    tool_name: str | None = Field(default=None, description="Name of the tool to call")
    arguments: dict[str, Any] = Field(default_factory=dict, description="The tool's arguments")


class McpObservation(Observation):
    tools: list[dict[str, Any]] | None = None
    result: Any = None


ECHO_TOOLS = [
    {
        "name": "echo_message",
        "description": "Echo a message back",
        "input_schema": {"type": "object", "properties": {"message": {"type": "string"}}},
    },
    {
        "name": "echo_with_length",
        "description": "Echo a message with its length",
        "input_schema": {"type": "object", "properties": {"message": {"type": "string"}}},
    },
]


class McpEchoEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, step_delay: float = 0.0) -> None:
        super().__init__()
        self._state = State()

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> McpObservation:
        self._state = State(episode_id=episode_id, step_count=0)
        return McpObservation(done=False, reward=0.0)

    def step(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> McpObservation:
        assert isinstance(action, McpAction)
        if action.type == "list_tools":
            return McpObservation(tools=ECHO_TOOLS, done=False, reward=0.0)
        if action.tool_name not in {tool["name"] for tool in ECHO_TOOLS}:
            raise ValueError(f"unknown tool {action.tool_name!r}")
        message = str(action.arguments.get("message", ""))
        return McpObservation(result=message, done=True, reward=1.0 if message else 0.0)

    @property
    def state(self) -> State:
        return self._state


# -- a task that lives in reset fields, as OpenEnv's REPL env -------------------------------
class TaskAction(Action):
    """Action carrying the final answer to the task.

    Attributes:
        answer: The final answer; it is compared with the expected answer given at reset.
    """

    answer: str = Field(..., description="The final answer")


class TaskObservation(Observation):
    task_prompt: str | None = None
    context: str | None = None
    feedback: str | None = None


class TaskState(State):
    context: str | None = None
    task_prompt: str | None = None


class ResetTaskEnvironment(Environment):
    """Like OpenEnv's ``REPLEnvironment``: the task, its context and the expected answer
    come only from reset fields (``task_prompt``, ``context``, ``expected_answer`` through
    ``**kwargs``); reset without them there is no task and every answer scores 0."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(
        self, step_delay: float = 0.0, received: list[dict[str, Any]] | None = None
    ) -> None:
        super().__init__()
        self._expected: str | None = None
        self._state = TaskState()
        #: every reset's extra fields, as received (a server run in a thread shares it)
        self._received = received

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        context: str | None = None,
        task_prompt: str | None = None,
        **kwargs: Any,
    ) -> TaskObservation:
        self._expected = kwargs.get("expected_answer")
        if self._received is not None:
            self._received.append(dict(kwargs))
        self._state = TaskState(
            episode_id=episode_id, step_count=0, context=context, task_prompt=task_prompt
        )
        return TaskObservation(task_prompt=task_prompt, context=context, done=False, reward=0.0)

    def step(
        self, action: Action, timeout_s: float | None = None, **kwargs: Any
    ) -> TaskObservation:
        assert isinstance(action, TaskAction)
        self._state.step_count += 1
        right = self._expected is not None and action.answer.strip() == str(self._expected)
        return TaskObservation(
            feedback="correct" if right else "wrong", done=True, reward=1.0 if right else 0.0
        )

    @property
    def state(self) -> TaskState:
        return self._state


# -- a game lost with partial reward, as OpenEnv's TextArena env ------------------------------
class ArenaAction(Action):
    message: str = Field(..., description="Your move: a guess in square brackets, e.g. [3]")


class ArenaObservation(Observation):
    prompt: str = ""
    guesses: list[int] = Field(default_factory=list)
    info: dict[str, Any] = Field(default_factory=dict)


class ArenaEnvironment(Environment):
    """Guess the number from 1 to 5 in three tries: a win scores 1, a loss the partial
    reward TextArena gives a lost game (0.5). No field of the observation says who won."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    TRIES = 3

    def __init__(self, step_delay: float = 0.0) -> None:
        super().__init__()
        self._target = 1
        self._guesses: list[int] = []
        self._state = State()

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> ArenaObservation:
        self._target = random.Random(seed).randint(1, 5)
        self._guesses = []
        self._state = State(episode_id=episode_id, step_count=0)
        return ArenaObservation(prompt="Guess the number from 1 to 5.", done=False, reward=0.0)

    def step(
        self, action: Action, timeout_s: float | None = None, **kwargs: Any
    ) -> ArenaObservation:
        assert isinstance(action, ArenaAction)
        self._state.step_count += 1
        digits = "".join(c for c in action.message if c.isdigit())
        guess = int(digits) if digits else 0
        self._guesses.append(guess)
        won = guess == self._target
        over = won or len(self._guesses) >= self.TRIES
        reward = 1.0 if won else 0.5 if over else 0.0
        return ArenaObservation(
            prompt="higher" if guess < self._target else "lower",
            guesses=list(self._guesses),
            done=over,
            reward=reward,
        )

    @property
    def state(self) -> State:
        return self._state


# -- no terminal state, as OpenEnv's coding env ---------------------------------------------
class CodeAction(Action):
    """Action containing Python code to execute.

    Attributes:
        code: The Python code to run; its output comes back in the observation.
    """

    code: str = Field(..., description="Python code to run")


class CodeObservation(Observation):
    stdout: str = ""
    exit_code: int = 0


class EndlessCodeEnvironment(Environment):
    """Like OpenEnv's ``PythonCodeActEnv``: every step scores 0.1 and no step ends the
    episode (``done`` is never true). Its ``/metadata`` names the class, its app the
    env's folder (``env_name="coding_env"``)."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    STEP_REWARD = 0.1

    def __init__(self, step_delay: float = 0.0, step_reward: float = STEP_REWARD) -> None:
        super().__init__()
        self._state = State()
        #: a hostile server may give 1e308 a step: two steps sum past float max
        self._step_reward = step_reward

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> CodeObservation:
        self._state = State(episode_id=episode_id, step_count=0)
        return CodeObservation(done=False, reward=0.0)

    def step(
        self, action: Action, timeout_s: float | None = None, **kwargs: Any
    ) -> CodeObservation:
        assert isinstance(action, CodeAction)
        self._state.step_count += 1
        return CodeObservation(
            stdout=f"ran {len(action.code)} chars", done=False, reward=self._step_reward
        )

    @property
    def state(self) -> State:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="PythonCodeActEnv", description="PythonCodeActEnv environment", version="1.0.0"
        )


# -- an env that says whether the episode was solved ------------------------------------------
class PuzzleAction(Action):
    move: str = Field(..., description="solve or give_up")


class PuzzleObservation(Observation):
    solved: bool | None = None


class PuzzleEnvironment(Environment):
    """One move ends it: ``solve`` is solved with reward 0.5, ``give_up`` unsolved with
    reward 1.0 (a reward that misleads; the ``solved`` field is the env's verdict)."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, step_delay: float = 0.0) -> None:
        super().__init__()
        self._state = State()

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> PuzzleObservation:
        self._state = State(episode_id=episode_id, step_count=0)
        return PuzzleObservation(done=False, reward=0.0)

    def step(
        self, action: Action, timeout_s: float | None = None, **kwargs: Any
    ) -> PuzzleObservation:
        assert isinstance(action, PuzzleAction)
        solved = action.move == "solve"
        return PuzzleObservation(solved=solved, done=True, reward=0.5 if solved else 1.0)

    @property
    def state(self) -> State:
        return self._state


# -- a goal behind step penalties, as OpenEnv's grid_world env ---------------------------------
class GridAction(Action):
    """Move the agent one cell.

    Attributes:
        action: UP, DOWN, LEFT or RIGHT.
    """

    action: str = Field(..., description="UP, DOWN, LEFT or RIGHT")


class GridObservation(Observation):
    x: int = 0
    y: int = 0
    message: str = ""


class GridWorldEnvironment(Environment):
    """Like OpenEnv's ``GridWorldEnvironment``: a 5x5 grid from [0, 0] to the goal [4, 4];
    every step costs -0.1, the goal pays +1 and only it ends the episode. Its ``reset()``
    takes no fields, so OpenEnv's server drops any a client sends (``grid_size``,
    ``goal_pos``) without a word, and its state is the base ``State``."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    SIZE, GOAL = 5, (4, 4)

    def __init__(self, step_delay: float = 0.0) -> None:
        super().__init__()
        self._x = self._y = 0
        self._state = State()

    def reset(self) -> GridObservation:  # type: ignore[override]
        self._x = self._y = 0
        self._state = State(step_count=0)
        return GridObservation(
            x=0, y=0, message=f"Welcome to Grid World! Goal is at {list(self.GOAL)}.", reward=0.0
        )

    def step(
        self, action: Action, timeout_s: float | None = None, **kwargs: Any
    ) -> GridObservation:
        assert isinstance(action, GridAction)
        self._state.step_count += 1
        dx, dy = {"UP": (-1, 0), "DOWN": (1, 0), "LEFT": (0, -1), "RIGHT": (0, 1)}.get(
            action.action.upper(), (0, 0)
        )
        self._x = max(0, min(self._x + dx, self.SIZE - 1))
        self._y = max(0, min(self._y + dy, self.SIZE - 1))
        if (self._x, self._y) == self.GOAL:
            return GridObservation(
                x=self._x, y=self._y, message="You found the goal!", reward=1.0, done=True
            )
        return GridObservation(x=self._x, y=self._y, message="Keep going...", reward=-0.1)

    @property
    def state(self) -> State:
        return self._state


# -- the outcome in the observation's metadata, as OpenEnv's maze env ---------------------------
class StatusMazeAction(Action):
    action: int = Field(..., description="0 left, 1 right")


class StatusMazeObservation(Observation):
    position: int = 0
    legal_actions: list[int] = Field(default_factory=list)


class StatusMazeEnvironment(Environment):
    """A corridor of cells 0..4 from 1: right to 4 wins, left to 0 falls in a pit. Each
    move costs -1, the exit pays +2 (a won game totals -1), the pit -2. As OpenEnv's maze
    env, ``metadata.status`` says ``playing``, ``win`` or ``lose``."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, step_delay: float = 0.0) -> None:
        super().__init__()
        self._position = 1
        self._state = State()

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> StatusMazeObservation:
        self._position = 1
        self._state = State(episode_id=episode_id, step_count=0)
        return self._observe(0.0, "playing")

    def step(
        self, action: Action, timeout_s: float | None = None, **kwargs: Any
    ) -> StatusMazeObservation:
        assert isinstance(action, StatusMazeAction)
        self._state.step_count += 1
        self._position += 1 if action.action == 1 else -1
        if self._position >= 4:
            return self._observe(-1.0 + 2.0, "win")
        if self._position <= 0:
            return self._observe(-1.0 - 2.0, "lose")
        return self._observe(-1.0, "playing")

    def _observe(self, reward: float, status: str) -> StatusMazeObservation:
        done = status != "playing"
        return StatusMazeObservation(
            position=self._position,
            legal_actions=[] if done else [0, 1],
            done=done,
            reward=reward,
            metadata={"status": status, "exit_at": 4},
        )

    @property
    def state(self) -> State:
        return self._state


# -- a board game that penalises an illegal move and states its result, as OpenEnv's chess ---
class TakeAwayAction(Action):
    """A move: take 1 or 2 counters; whoever takes the last counter wins.

    Attributes:
        move: "1" or "2" (anything else is an illegal move: -0.1, the position stays).
    """

    move: str = Field(..., description="1 or 2")


class TakeAwayObservation(Observation):
    fen: str = ""
    legal_moves: list[str] = Field(default_factory=list)
    result: str | None = None


class TakeAwayState(State):
    fen: str = "5 w 0 1"
    agent_color: str = "white"
    result: str | None = None


def normalised_fen(fen: str) -> str:
    """``5 w`` -> ``5 w 0 1``: the server spells out the move counters, as python-chess
    does with a FEN that leaves them out."""
    parts = fen.split()
    return " ".join(parts + ["0", "1"][len(parts) - 2 :]) if len(parts) < 4 else fen


class TakeAwayEnvironment(Environment):
    """Take-away from a position ``"<counters> <side to move> <halfmoves> <move>"`` (a FEN
    of sorts, reset field ``fen``). The agent plays white; black (the server's opponent)
    always takes 1, and moves at once when the reset position has black to move. An
    illegal move costs -0.1 and does not end the game; the win pays +1, the loss -1. As
    OpenEnv's chess env, the result is ``1-0`` / ``0-1`` (in the observation and state)."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, step_delay: float = 0.0) -> None:
        super().__init__()
        self._counters = 5
        self._state = TakeAwayState()

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        fen: str | None = None,
        **kwargs: Any,
    ) -> TakeAwayObservation:
        fen = normalised_fen(fen or "5 w")
        self._counters = int(fen.split()[0])
        self._state = TakeAwayState(episode_id=episode_id, step_count=0, fen=fen)
        if fen.split()[1] == "b":
            self._opponent()
        return self._observe(0.0)

    def step(
        self, action: Action, timeout_s: float | None = None, **kwargs: Any
    ) -> TakeAwayObservation:
        assert isinstance(action, TakeAwayAction)
        self._state.step_count += 1
        if action.move not in self._legal():
            return self._observe(-0.1)
        self._counters -= int(action.move)
        if self._counters == 0:
            return self._over("1-0", 1.0)
        self._opponent()
        if self._counters == 0:
            return self._over("0-1", -1.0)
        return self._observe(0.0)

    def _opponent(self) -> None:
        self._counters -= 1
        self._state.fen = f"{self._counters} w 0 {self._state.step_count + 1}"

    def _legal(self) -> list[str]:
        return [m for m in ("1", "2") if int(m) <= self._counters]

    def _over(self, result: str, reward: float) -> TakeAwayObservation:
        self._state.result = result
        self._state.fen = f"0 - 0 {self._state.step_count}"
        # the result only in the state, as a server that keeps its observation lean
        return TakeAwayObservation(fen=self._state.fen, done=True, reward=reward)

    def _observe(self, reward: float) -> TakeAwayObservation:
        return TakeAwayObservation(fen=self._state.fen, legal_moves=self._legal(), reward=reward)

    @property
    def state(self) -> TakeAwayState:
        return self._state


# -- an RNG seeded once per session, whatever the reset seed --------------------------------
class DrawAction(Action):
    guess: int = Field(..., description="your guess of the hidden number, 0..9")


class DrawObservation(Observation):
    clue: str = ""


class SessionSeededEnvironment(Environment):
    """Guess a hidden number 0..9 from a clue. The env seeds its RNG once, when its session
    opens (``random.Random(0)``), and ignores the reset seed: every fresh session's first
    episode is the same problem."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, step_delay: float = 0.0) -> None:
        super().__init__()
        self._rng = random.Random(0)
        self._hidden = 0
        self._state = State()

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> DrawObservation:
        self._hidden = self._rng.randrange(10)
        self._state = State(episode_id=episode_id, step_count=0)
        return DrawObservation(clue=f"the number is {self._hidden}", reward=0.0)

    def step(
        self, action: Action, timeout_s: float | None = None, **kwargs: Any
    ) -> DrawObservation:
        assert isinstance(action, DrawAction)
        right = action.guess == self._hidden
        return DrawObservation(clue="", done=True, reward=1.0 if right else 0.0)

    @property
    def state(self) -> State:
        return self._state


# -- a snake that ends only when it dies, as OpenEnv's snake env ----------------------------
class SnakeAction(Action):
    """Action for the snake: 0 straight on, 1 turn left, 2 turn right."""

    action: int = Field(..., ge=0, le=2, description="0 straight on, 1 turn left, 2 turn right")


class SnakeObservation(Observation):
    grid: list[list[int]] = Field(default_factory=list)
    episode_score: float = 0.0
    episode_steps: int = 0
    episode_fruits: int = 0
    alive: bool = True


class SnakeEnvironment(Environment):
    """OpenEnv's snake env on the points its verdict turns on: its default rewards (a fruit
    1, each step alive 0.001, dying -1, the step that dies scoring only that) and an
    episode that ends only when the snake dies (OpenEnv's cap is 1,000 steps). An 8x8 grid
    walled round; the snake, three long, heads east from (4, 1) with its tail to the north,
    and the one fruit lies two cells ahead (the seed is ignored, as OpenEnv's server ignores
    it). Straight on, the snake eats and then dies at the east wall on its sixth step;
    turning left at every step once it has eaten, it circles a 2x2 square for ever."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    SIZE = 8
    FRUIT, STEP, DEATH = 1.0, 0.001, -1.0
    #: heading (row, column) after a turn: left is counter-clockwise
    TURNS = {
        (0, 1): ((-1, 0), (1, 0)),
        (-1, 0): ((0, -1), (0, 1)),
        (0, -1): ((1, 0), (-1, 0)),
        (1, 0): ((0, 1), (0, -1)),
    }

    def __init__(self, step_delay: float = 0.0) -> None:
        super().__init__()
        self._state = State()
        self._body: list[tuple[int, int]] = []
        self._heading = (0, 1)
        self._fruit: tuple[int, int] | None = None
        self._fruits = 0
        self._score = 0.0

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> SnakeObservation:
        self._state = State(episode_id=episode_id, step_count=0)
        self._body = [(4, 1), (3, 1), (2, 1)]  # head first
        self._heading = (0, 1)
        self._fruit = (4, 3)
        self._fruits, self._score = 0, 0.0
        return self._observe(done=False, reward=0.0)

    def step(
        self, action: Action, timeout_s: float | None = None, **kwargs: Any
    ) -> SnakeObservation:
        assert isinstance(action, SnakeAction)
        self._state.step_count += 1
        if action.action:
            self._heading = self.TURNS[self._heading][action.action - 1]
        head = (self._body[0][0] + self._heading[0], self._body[0][1] + self._heading[1])
        eats = head == self._fruit
        # the tail moves on as the head moves in, unless the snake grows
        keeps = self._body if eats else self._body[:-1]
        walled = not (0 < head[0] < self.SIZE - 1 and 0 < head[1] < self.SIZE - 1)
        if walled or head in keeps:
            self._score += self.DEATH
            return self._observe(done=True, reward=self.DEATH)
        self._body = [head, *keeps]
        reward = self.STEP
        if eats:
            reward += self.FRUIT
            self._fruits += 1
            self._fruit = None  # no second fruit: what is at stake is eating once
        self._score += reward
        return self._observe(done=False, reward=reward)

    def _observe(self, *, done: bool, reward: float) -> SnakeObservation:
        grid = [[0] * self.SIZE for _ in range(self.SIZE)]
        for row in range(self.SIZE):
            grid[row][0] = grid[row][-1] = grid[0][row] = grid[-1][row] = 1
        if self._fruit is not None:
            grid[self._fruit[0]][self._fruit[1]] = 2
        for row, column in self._body:
            grid[row][column] = 3
        return SnakeObservation(
            grid=grid,
            episode_score=self._score,
            episode_steps=self._state.step_count,
            episode_fruits=self._fruits,
            alive=not done,
            done=done,
            reward=reward,
        )

    @property
    def state(self) -> State:
        return self._state


# -- a secret kept in the state and drawn whatever the seed, as TextArena's server -----------
class TextArenaAction(Action):
    message: str = Field(..., description="Your guess in square brackets, e.g. [7]")


class TextArenaObservation(Observation):
    prompt: str = ""
    messages: list[dict[str, Any]] = Field(default_factory=list)
    current_player_id: int = 0
    legal_players: list[int] = Field(default_factory=list)
    info: dict[str, Any] = Field(default_factory=dict)


class TextArenaState(State):
    env_id: str = "GuessTheNumber-v0"
    raw_state: dict[str, Any] = Field(default_factory=dict)


class GuessNumberEnvironment(Environment):
    """TextArena's GuessTheNumber as OpenEnv's server hosts it where its reset does not
    pass the seed on: every reset draws a new number from 1 to 20 from an unseeded RNG.
    The prompt is the same for every game; the number shows only in the state
    (``raw_state.game_state.game_number``). A right guess scores 1 and ends the game."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    PROMPT = "You are playing Guess The Number: guess the number between 1 and 20, as [n]."

    def __init__(self, step_delay: float = 0.0) -> None:
        super().__init__()
        self._rng = random.Random()  # unseeded: the reset seed never reaches it
        self._number = 0
        self._state = TextArenaState()

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> TextArenaObservation:
        self._number = self._rng.randint(1, 20)
        self._state = TextArenaState(
            episode_id=episode_id,
            step_count=0,
            raw_state={"turn": 0, "game_state": {"game_number": self._number}},
        )
        return TextArenaObservation(prompt=self.PROMPT, legal_players=[0], reward=0.0)

    def step(
        self, action: Action, timeout_s: float | None = None, **kwargs: Any
    ) -> TextArenaObservation:
        assert isinstance(action, TextArenaAction)
        self._state.step_count += 1
        digits = "".join(c for c in action.message if c.isdigit())
        right = digits == str(self._number)
        return TextArenaObservation(
            prompt=self.PROMPT, legal_players=[0], done=right, reward=1.0 if right else 0.0
        )

    @property
    def state(self) -> TextArenaState:
        return self._state


# -- OpenEnv's echo env: MCP tools, errors in the observation, never done -------------------
class ToolErrorModel(BaseModel):
    error_type: str
    message: str


class CallToolObservation(Observation):
    tool_name: str | None = None
    result: Any = Field(default=None, description="Tool-specific result (may include tool errors)")
    error: ToolErrorModel | None = Field(
        default=None, description="Transport/framework error if call failed"
    )
    tools: list[dict[str, Any]] | None = None


class EchoMcpEnvironment(Environment):
    """Like OpenEnv's ``EchoEnvironment`` (an ``MCPEnvironment``): reset answers
    ``metadata {"status": "ready"}``; ``list_tools`` lists ``echo_message``; a call of an
    unknown tool comes back as an observation with ``error: {error_type: tool_not_found,
    message}``, one whose tool fails as ``result: {content, is_error: true}`` (an empty
    message), neither refused by the server. Reward 0, never done."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, step_delay: float = 0.0) -> None:
        super().__init__()
        self._state = State()

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> CallToolObservation:
        self._state = State(episode_id=episode_id, step_count=0)
        return CallToolObservation(
            reward=0.0, metadata={"status": "ready", "message": "Echo environment ready!"}
        )

    def step(
        self, action: Action, timeout_s: float | None = None, **kwargs: Any
    ) -> CallToolObservation:
        assert isinstance(action, McpAction)
        self._state.step_count += 1
        if action.type == "list_tools":
            return CallToolObservation(tools=ECHO_TOOLS[:1], reward=0.0)
        name = action.tool_name
        if name != "echo_message":
            error = ToolErrorModel(error_type="tool_not_found", message=f"Unknown tool: {name}")
            return CallToolObservation(tool_name=name, error=error, reward=0.0)
        message = str(action.arguments.get("message") or "")
        if not message:
            failed = {"content": [{"type": "text", "text": "message is empty"}], "is_error": True}
            return CallToolObservation(tool_name=name, result=failed, reward=0.0)
        echoed = {"content": [{"type": "text", "text": message}], "is_error": False}
        return CallToolObservation(tool_name=name, result=echoed, reward=0.0)

    @property
    def state(self) -> State:
        return self._state


# -- an action that fails inside the page, as BrowserGym's server says it -------------------
class BrowserAction(Action):
    action_str: str = Field(..., description="A BrowserGym action, e.g. click('12')")


class BrowserObservation(Observation):
    text: str = ""
    goal: str = ""
    error: str = Field(default="", description="Error message if action failed")
    last_action_error: bool = Field(default=False, description="Whether last action failed")


class BrowserEnvironment(Environment):
    """MiniWoB's click-button as OpenEnv's BrowserGym server reports it: clicking the button
    (``click('7')``) scores 1 and ends the task; any other action fails in the page and
    comes back as an observation with ``last_action_error: true`` and ``error``, the
    episode going on."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    PAGE = "[7] button 'Submit'"

    def __init__(self, step_delay: float = 0.0) -> None:
        super().__init__()
        self._state = State()

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> BrowserObservation:
        self._state = State(episode_id=episode_id, step_count=0)
        return BrowserObservation(text=self.PAGE, goal="Click the Submit button.", reward=0.0)

    def step(
        self, action: Action, timeout_s: float | None = None, **kwargs: Any
    ) -> BrowserObservation:
        assert isinstance(action, BrowserAction)
        self._state.step_count += 1
        if action.action_str.replace('"', "'") == "click('7')":
            return BrowserObservation(text=self.PAGE, done=True, reward=1.0)
        return BrowserObservation(
            text=self.PAGE,
            error=f"ValueError: Could not find element for action {action.action_str!r}",
            last_action_error=True,
            reward=0.0,
        )

    @property
    def state(self) -> State:
        return self._state


# -- a server whose every reset fails --------------------------------------------------------
class BrokenResetEnvironment(EchoEnvironment):
    """The ``echo`` env with a reset that always raises (a server missing its data)."""

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> EchoObservation:
        raise RuntimeError("the word list is missing on this server")


# -- tic-tac-toe that does not say what it hosts --------------------------------------------
class SilentTicTacToeEnvironment(TicTacToeEnvironment):
    """The ``tictactoe`` env with a bare ``State``: no game name anywhere."""

    @property
    def state(self) -> State:
        return State(episode_id=self._state.episode_id, step_count=self._state.step_count)


ENVS: dict[str, tuple[type[Environment], type[Action], type[Observation], type[State]]] = {
    "guess_number": (
        GuessNumberEnvironment,
        TextArenaAction,
        TextArenaObservation,
        TextArenaState,
    ),
    "echo_mcp": (EchoMcpEnvironment, McpAction, CallToolObservation, State),
    "browser": (BrowserEnvironment, BrowserAction, BrowserObservation, State),
    "broken_reset": (BrokenResetEnvironment, EchoAction, EchoObservation, State),
    "silent_tictactoe": (SilentTicTacToeEnvironment, OpenSpielAction, OpenSpielObservation, State),
    "tictactoe": (TicTacToeEnvironment, OpenSpielAction, OpenSpielObservation, OpenSpielState),
    "reasoning_gym": (
        ReasoningGymEnvironment,
        ReasoningGymAction,
        ReasoningGymObservation,
        State,
    ),
    "echo": (EchoEnvironment, EchoAction, EchoObservation, State),
    # OpenEnv's openspiel app is made without a state class: GET /state is the base State
    "openspiel": (DeployedOpenSpielEnvironment, OpenSpielAction, OpenSpielObservation, State),
    "maze": (MazeEnvironment, MazeAction, MazeObservation, State),
    "mcp_echo": (McpEchoEnvironment, McpAction, McpObservation, State),
    "reset_task": (ResetTaskEnvironment, TaskAction, TaskObservation, TaskState),
    "arena": (ArenaEnvironment, ArenaAction, ArenaObservation, State),
    "endless": (EndlessCodeEnvironment, CodeAction, CodeObservation, State),
    "puzzle": (PuzzleEnvironment, PuzzleAction, PuzzleObservation, State),
    "grid_world": (GridWorldEnvironment, GridAction, GridObservation, State),
    "status_maze": (StatusMazeEnvironment, StatusMazeAction, StatusMazeObservation, State),
    "take_away": (TakeAwayEnvironment, TakeAwayAction, TakeAwayObservation, TakeAwayState),
    "session_seeded": (SessionSeededEnvironment, DrawAction, DrawObservation, State),
    "snake": (SnakeEnvironment, SnakeAction, SnakeObservation, State),
}
#: the ``env_name`` each kind's app is made with (``GET /list_environments``), as OpenEnv's
#: ``create_app(..., env_name=...)`` calls give it; other kinds use their own name
ENV_NAMES = {
    "guess_number": "textarena_env",
    "echo_mcp": "echo_env",
    "browser": "browsergym_env",
    "openspiel": "openspiel_env",
    "endless": "coding_env",
    "reset_task": "repl_env",
    "grid_world": "grid_world_env",
    "status_maze": "maze_env",
    "snake": "snake_env",
}


# -- app -----------------------------------------------------------------------------------
def build_app(
    kind: str,
    *,
    max_sessions: int = 64,
    step_delay: float = 0.0,
    reset_schema: dict[str, Any] | None = None,
    schema_drift: bool = False,
    **env_options: Any,
) -> Any:
    """OpenEnv's HTTP + WebSocket server for one env kind (what ``create_app`` builds).

    ``env_options`` go to the env's constructor: for the ``openspiel`` kind ``game`` (as
    OpenEnv's ``OPENSPIEL_GAME``), ``game_params``, ``opponent_policy``
    (``OPENSPIEL_OPPONENT_POLICY``), ``agent_player`` (``OPENSPIEL_AGENT_PLAYER``) and
    ``reset_delay`` (a reset that hangs). ``reset_schema``: a JSON schema of the reset
    fields, published in ``GET /schema`` under ``reset`` (OpenEnv's servers publish none);
    ``schema_drift``: ``GET /schema`` answers a changed action schema after its first
    answer (a server redeployed while a run goes on).
    """
    from fastapi import FastAPI

    env_cls, action_cls, observation_cls, state_cls = ENVS[kind]
    options: dict[str, Any] = {"step_delay": step_delay, **env_options}

    def factory() -> Environment:
        return env_cls(**options)

    factory.__name__ = env_cls.__name__
    app = FastAPI(title=f"test OpenEnv server: {kind}")
    server = HTTPEnvServer(
        factory,
        action_cls,
        observation_cls,
        max_concurrent_envs=max_sessions,
        env_name=ENV_NAMES.get(kind, kind),
        state_cls=state_cls,
    )
    stats = {"sessions_opened": 0, "refused_sessions": 0, "peak_sessions": 0, "schema_reads": 0}
    create_session = server._create_session

    async def counting_create_session() -> Any:
        try:
            created = await create_session()
        except SessionCapacityError:
            stats["refused_sessions"] += 1
            raise
        stats["sessions_opened"] += 1
        stats["peak_sessions"] = max(stats["peak_sessions"], server.active_sessions)
        return created

    server._create_session = counting_create_session  # type: ignore[method-assign]

    def schema() -> dict[str, Any]:
        stats["schema_reads"] += 1
        answer: dict[str, Any] = {
            "action": action_cls.model_json_schema(),
            "observation": observation_cls.model_json_schema(),
            "state": state_cls.model_json_schema(),
        }
        if reset_schema is not None:
            answer["reset"] = reset_schema
        if schema_drift and stats["schema_reads"] > 1:
            answer["action"] = {
                **answer["action"],
                "description": f"redeployed (schema read {stats['schema_reads']})",
            }
        return answer

    if reset_schema is not None or schema_drift:
        # registered before OpenEnv's routes, so this /schema is the one that answers
        app.get("/schema")(schema)
    server.register_routes(app, mode="simulation")

    @app.get("/test/stats")
    def test_stats() -> dict[str, int]:
        return dict(stats)

    return app


def get_json(url: str, timeout: float = 5.0) -> Any:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=timeout) as response:
        return json.loads(response.read())


def wait_healthy(url: str, timeout: float = 60.0, alive: Any = None) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            get_json(url + "/health", timeout=2.0)
            return
        except OSError:
            if alive is not None and not alive():
                raise RuntimeError(f"test server for {url} exited before it was healthy") from None
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _bind() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


def _uvicorn_server(app: Any) -> Any:
    import uvicorn

    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="on", ws_ping_interval=None
    )
    return uvicorn.Server(config)


class ThreadServer:
    """A server in a thread of this process; ``stop()`` shuts it down."""

    def __init__(self, app: Any) -> None:
        self._sock = _bind()
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._server = _uvicorn_server(app)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )
        self._thread.start()
        wait_healthy(self.url, alive=self._thread.is_alive)

    def stats(self) -> dict[str, int]:
        return get_json(self.url + "/test/stats")

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        with contextlib.suppress(OSError):
            self._sock.close()

    def __enter__(self) -> ThreadServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_in_thread(kind: str, **options: Any) -> ThreadServer:
    return ThreadServer(build_app(kind, **options))


class ServerProcess:
    """A server in its own process, so a test can kill it mid-run."""

    def __init__(self, kind: str, *, max_sessions: int = 64, step_delay: float = 0.0) -> None:
        command = [
            sys.executable,
            str(Path(__file__).resolve()),
            kind,
            "--max-sessions",
            str(max_sessions),
            "--step-delay",
            str(step_delay),
        ]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        line = self.process.stdout.readline() if self.process.stdout else ""
        if not line.startswith("PORT "):
            self.process.kill()
            raise RuntimeError(f"test server {kind} did not start: {line!r}")
        self.port = int(line.split()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        wait_healthy(self.url, alive=lambda: self.process.poll() is None)

    def stats(self) -> dict[str, int]:
        return get_json(self.url + "/test/stats")

    def kill(self) -> None:
        """Die at once, as a crashed container would: sockets reset, no goodbye frames."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        if self.process.stdout:
            self.process.stdout.close()

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=KINDS)
    parser.add_argument("--max-sessions", type=int, default=64)
    parser.add_argument("--step-delay", type=float, default=0.0)
    args = parser.parse_args(argv)
    app = build_app(args.kind, max_sessions=args.max_sessions, step_delay=args.step_delay)
    sock = _bind()
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    _uvicorn_server(app).run(sockets=[sock])


if __name__ == "__main__":
    main()
