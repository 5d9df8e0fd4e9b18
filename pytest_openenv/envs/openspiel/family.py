"""The ``openspiel`` family: any turn-based pyspiel game, one tool ``play_move(action_id)``."""

from __future__ import annotations

import difflib
from typing import Any, ClassVar

from ...util.memo import BoundedMemo
from ..base import (
    DEFAULT_MAX_TURNS,
    ActionRejected,
    Backend,
    EnvConfigError,
    EnvFamily,
    EnvUnavailable,
    ProposedCall,
    StepResult,
    ToolSpec,
    single_argument,
)
from . import openenv_style
from .engine import OPPONENTS, OpenSpielEngine, load_game
from .expert import ExpertError, ExpertSearch, move_seed, rebuild_state
from .remote import ALTERNATING_GAMES
from .render import (
    DRAWINGS_KEPT,
    DRAWN_GAMES,
    Drawings,
    fixed_action_names,
    render_board,
    tensor_view,
)

#: a family default past this would let one stuck LLM episode run (and bill) for long
MOST_DEFAULT_TURNS = 50

CONFIG_KEYS = ("agent_player", "opponent", "game_params")
#: each opponent (``engine.OPPONENTS``) as the prompt names it
OPPONENT_WORDS = {
    "random": "a random opponent",
    "first": "an opponent that always plays its first legal action",
    "last": "an opponent that always plays its last legal action",
    "expert": "an expert opponent (a search bot)",
    "middle": "an opponent that always plays its middle legal action (the server's)",
}
#: opponents OpenEnv's openspiel server plays (``OPENSPIEL_OPPONENT_POLICY``) that the
#: embedded engine does not: accepted on --openenv-server only, recorded as the server's
SERVER_OPPONENTS = ("middle",)
#: each drawn game's marks, by player (pyspiel's: player 0 moves first)
MARKS = {"tic_tac_toe": ("X", "O"), "connect_four": ("x", "o")}
#: games whose view is a board every player sees whole
BOARD_GAMES = DRAWN_GAMES | {"catch"}


class OpenSpielFamily(EnvFamily):
    name: ClassVar[str] = "openspiel"
    default_min_reward: ClassVar[float] = 0.0
    system_prompt: ClassVar[str] = (
        "You are playing a game. On each turn call the play_move tool with the "
        "action_id of one legal action. Play to win; avoid losing."
    )
    offers_expert: ClassVar[bool] = True
    prompt_styles: ClassVar[tuple[str, ...]] = ("native", "openenv")

    def __init__(self, variant: str, config: dict[str, Any]) -> None:
        super().__init__(variant, config)
        unknown = sorted(set(config) - set(CONFIG_KEYS))
        if unknown:
            raise EnvConfigError(
                f"unknown openspiel env config key(s) {unknown}; valid keys: {list(CONFIG_KEYS)}"
            )
        self.opponent = config.get("opponent", "random")
        if self.opponent not in (*OPPONENTS, *SERVER_OPPONENTS):
            raise EnvConfigError(
                f"openspiel opponent {self.opponent!r} is not one of {list(OPPONENTS)} "
                f"(or, on OpenEnv's openspiel server, {list(SERVER_OPPONENTS)})"
            )
        self.agent_player = config.get("agent_player", 0)
        if not isinstance(self.agent_player, int) or isinstance(self.agent_player, bool):
            raise EnvConfigError(
                f"openspiel agent_player must be an integer, got {self.agent_player!r}"
            )
        self.game_params = config.get("game_params", {}) or {}
        if not isinstance(self.game_params, dict):
            raise EnvConfigError(
                f"openspiel game_params must be a JSON object, got {self.game_params!r}"
            )
        self._game = self._load()
        self._players = self._game.num_players()  # asked on every move: once is enough
        self._max_turns: int | None = None
        #: the expert teacher's and opponent's search, with its memo of best moves
        self.expert = ExpertSearch(self._game)
        #: boards drawn before: each position is drawn once, for every episode of the family
        self.drawings: Drawings = BoundedMemo(DRAWINGS_KEPT)
        if self.opponent == "expert" and self.expert.problem():
            raise EnvConfigError(
                f"openspiel opponent 'expert' cannot play {self.variant}: {self.expert.problem()}"
            )

    def _load(self) -> Any:
        try:
            import pyspiel
        except ImportError as exc:
            raise EnvConfigError(
                "the openspiel family needs OpenSpiel: pip install 'pytest-openenv[openspiel]'"
            ) from exc
        names = list(pyspiel.registered_names())
        if self.variant not in names:
            close = difflib.get_close_matches(self.variant, names, n=3, cutoff=0.6)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise EnvConfigError(
                f"unknown OpenSpiel game {self.variant!r}{hint} "
                f"(pyspiel has {len(names)} games, e.g. tic_tac_toe, connect_four, catch)"
            )
        try:
            game = load_game(self.variant, self.game_params)
        except Exception as exc:  # pyspiel raises plain RuntimeError for bad params
            raise EnvConfigError(
                f"OpenSpiel could not load {self.variant!r} with game_params "
                f"{self.game_params}: {exc}"
            ) from exc
        game_type = game.get_type()
        if game_type.dynamics != pyspiel.GameType.Dynamics.SEQUENTIAL:
            raise EnvConfigError(
                f"OpenSpiel game {self.variant!r} is not turn-based "
                f"({game_type.dynamics.name}); use a sequential game such as tic_tac_toe"
            )
        if not 0 <= self.agent_player < game.num_players():
            raise EnvConfigError(
                f"agent_player {self.agent_player} is out of range for {self.variant!r} "
                f"({game.num_players()} player(s): 0..{game.num_players() - 1})"
            )
        return game

    def default_max_turns(self) -> int:
        # Enough turns for the agent's share of the longest game (connect four: 21 of 42
        # moves), so the limit never ends a game the policy is still playing properly.
        # Asked once per episode: the game's length is worked out once.
        if self._max_turns is None:
            moves = -(-self._game.max_game_length() // max(self._players, 1))
            self._max_turns = max(DEFAULT_MAX_TURNS, min(moves, MOST_DEFAULT_TURNS))
        return self._max_turns

    def default_system_prompt(self) -> str:
        # OpenEnv's harness records no system message (openenv collect gives an LLM teacher
        # its own, outside the transcript)
        return "" if self.prompt_style == "openenv" else self.system_prompt

    def tools(self) -> list[ToolSpec]:
        if self.prompt_style == "openenv":
            return [openenv_style.PLAY_MOVE]
        return [
            ToolSpec(
                name="play_move",
                description="Play one legal move, given by its action id.",
                parameters={
                    "type": "object",
                    "properties": {
                        "action_id": {
                            "type": "integer",
                            "description": "The id of a legal action.",
                        }
                    },
                    "required": ["action_id"],
                    "additionalProperties": False,
                },
            )
        ]

    def bind_servers(self, servers: tuple[str, ...]) -> None:
        super().bind_servers(servers)
        if not servers and self.opponent in SERVER_OPPONENTS:
            raise EnvConfigError(
                f"openspiel opponent {self.opponent!r} is one OpenEnv's openspiel server plays "
                f"(OPENSPIEL_OPPONENT_POLICY={self.opponent}), not the embedded engine: pass "
                f"--openenv-server URL of such a server, or set opponent to one of "
                f"{list(OPPONENTS)}"
            )

    def embedded_backend(self) -> Backend:
        return OpenSpielEngine(
            self._game,
            agent_player=self.agent_player,
            opponent=self.opponent,
            name_actions=self.variant not in DRAWN_GAMES,
            expert=self.expert,
        )

    def remote_backend(self, server_url: str) -> Backend:
        from .remote import HistoryTrackingRemote

        return HistoryTrackingRemote(server_url)

    action_fields: ClassVar[tuple[str, ...]] = ("action_id",)

    def hosted_by(self, report: Any) -> dict[str, Any] | None:
        from .hosting import hosted_game

        return hosted_game(report)

    def hosting_mismatch(self, hosted: dict[str, Any]) -> str | None:
        from .hosting import game_mismatch

        return game_mismatch(
            hosted,
            variant=self.variant,
            game=self._game,
            game_params=self.game_params,
            agent=self.agent_player,
            opponent=self.opponent,
        )

    def expert_problem(self) -> str | None:
        problem = self.expert.problem()
        if problem:
            return problem
        if self.servers and self.variant not in ALTERNATING_GAMES:
            return (
                f"on --openenv-server the expert rebuilds the game from the server's moves, "
                f"which is exact only for {', '.join(ALTERNATING_GAMES)}; run {self.variant} "
                "on the embedded engine (leave out --openenv-server)"
            )
        return None

    def expert_call(
        self, current: StepResult, *, seed: int, repeat: int = 0
    ) -> ProposedCall | None:
        legal = current.observation.get("legal_actions") or []
        if current.done or not legal:
            return None
        history = current.metadata.get("action_history")
        if history is None:
            raise EnvUnavailable(
                "the expert needs the game's action history, which this backend did not keep"
            )
        state = rebuild_state(self._game, history)
        if (
            state.is_terminal()
            or state.current_player() != self.agent_player
            or sorted(state.legal_actions()) != sorted(legal)
        ):
            raise EnvUnavailable(
                f"the expert rebuilt {self.variant} from the moves {history}, but that "
                "position does not match the env's (its player to move or legal actions "
                "differ); the expert needs the embedded engine for this game"
            )
        try:
            action = self.expert.choose(state, seed=move_seed("expert", seed, repeat, len(history)))
        except ExpertError as exc:
            raise EnvUnavailable(f"the expert cannot move: {exc}") from exc
        return ProposedCall("play_move", {"action_id": action})

    def _show(self, result: StepResult) -> str:
        obs = result.observation
        lines = []
        info_state = obs.get("info_state") or []
        board = render_board(self.variant, info_state, self.agent_player, self.drawings)
        if board is None:
            text = result.metadata.get("text")
            board = str(text).rstrip() if text else None
        if board is None:  # a server that sends only the tensor: what each number means
            board = tensor_view(self._game, info_state)
        if board:
            label = "Board:" if self.variant in BOARD_GAMES else "Your view:"
            lines += [label, board]
        if result.done:
            lines.append("The game is over.")
        else:
            legal = obs.get("legal_actions") or []
            names: dict[str, str] = {}
            if self.variant not in DRAWN_GAMES:
                names = result.metadata.get("action_names") or self.fixed_names()
            shown = ", ".join(
                f"{a} ({names[str(a)]})" if str(a) in names else str(a) for a in legal
            )
            lines.append(f"Legal actions: {shown}")
        return "\n".join(lines)

    def fixed_names(self) -> dict[str, str]:
        """The agent's action names that hold in every position (``fixed_action_names``), for
        servers that send ids only; worked out once per family."""
        names = self.__dict__.get("_fixed_names")
        if names is None:
            names = self.__dict__["_fixed_names"] = fixed_action_names(
                self._game, self.agent_player
            )
        return names

    def _you_are(self) -> str:
        if self.variant in MARKS:
            mark = MARKS[self.variant][self.agent_player]
            return f"You play {mark} (player {self.agent_player}) against {self._opponent_text()}."
        if self._players == 1:
            return "This is a single-player game."
        return f"You are player {self.agent_player} against {self._opponent_text()}."

    def _opponent_text(self) -> str:
        """Who the agent plays against, in words: ``a random opponent``."""
        return OPPONENT_WORDS.get(self.opponent, f"a {self.opponent} opponent")

    def describe_task(self, first: StepResult) -> str:
        if self.prompt_style == "openenv":
            return openenv_style.task_prompt(self.variant, first)
        opening = ""
        last = first.observation.get("opponent_last_action")
        if last is not None:
            opening = f"Your opponent opened with action {last}.\n"
        return (
            f"Game: {self.variant}. {self._you_are()}\n{opening}{self._show(first)}\n"
            "Call play_move with the action_id of your move."
        )

    def describe_result(self, call: ProposedCall, result: StepResult) -> str:
        if self.prompt_style == "openenv":
            return openenv_style.tool_result(self.variant, call, result)
        parts = [f"You played {call.arguments.get('action_id')}."]
        last = result.observation.get("opponent_last_action")
        if last is not None and self._players > 1 and not result.done:
            parts.append(f"Opponent played {last}.")
        elif last is not None and result.done and self._players > 1:
            parts.append(f"Last opponent move: {last}.")
        parts.append(self._show(result))
        if result.done:
            parts.append(f"Final reward: {result.reward if result.reward is not None else 0.0}.")
        return "\n".join(parts)

    def to_action(self, call: ProposedCall, current: StepResult) -> dict[str, Any]:
        action_id = single_argument(call, "play_move", "action_id", "an integer legal action id")
        if not isinstance(action_id, int) or isinstance(action_id, bool):
            raise ActionRejected(
                f"action_id must be an integer, got {action_id!r} ({type(action_id).__name__})"
            )
        legal = current.observation.get("legal_actions") or []
        if action_id not in legal:
            raise ActionRejected(f"action_id {action_id} is not legal now; legal actions: {legal}")
        return {"action_id": action_id, "game_name": self.variant, "game_params": self.game_params}

    def scripted_call(self, current: StepResult) -> ProposedCall | None:
        legal = current.observation.get("legal_actions") or []
        return ProposedCall("play_move", {"action_id": int(legal[0])}) if legal else None

    def legal_calls(self, current: StepResult) -> list[ProposedCall] | None:
        return [
            ProposedCall("play_move", {"action_id": int(a)})
            for a in current.observation.get("legal_actions") or []
        ]

    def outcome(self, reward: float, done: bool, status: str | None = None) -> str:
        if not done:
            return "unfinished"
        if self._players == 1:
            return f"score {reward:g}"
        if reward > 0:
            return "win"
        return "draw" if reward == 0 else "loss"
