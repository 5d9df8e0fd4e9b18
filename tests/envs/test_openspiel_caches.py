"""The openspiel family's own caches: the expert's plan and best moves, the drawn boards."""

from __future__ import annotations

from pytest_openenv.envs.openspiel import OpenSpielFamily
from pytest_openenv.envs.openspiel.render import render_board
from pytest_openenv.episode.loop import EnvFactory, run_episode
from pytest_openenv.episode.spec import EpisodeSpec
from pytest_openenv.policies.expert import ExpertPolicy

ENV = "openspiel:tic_tac_toe"


def play(family: OpenSpielFamily, seed: int) -> None:
    run_episode(EpisodeSpec(ENV, seed, seed), EnvFactory(family), ExpertPolicy())


def test_the_expert_plans_each_game_once_by_the_size_of_its_search() -> None:
    assert OpenSpielFamily("tic_tac_toe", {}).expert.plan.kind == "alpha-beta"
    assert OpenSpielFamily("connect_four", {}).expert.plan.kind == "mcts"
    assert OpenSpielFamily("kuhn_poker", {}).expert.plan.kind == "ismcts"
    family = OpenSpielFamily("tic_tac_toe", {})
    assert family.expert.plan is family.expert.plan


def test_exact_best_moves_are_searched_once_per_position_for_every_episode_of_a_family() -> None:
    family = OpenSpielFamily("tic_tac_toe", {})
    play(family, 0)
    searched = len(family.expert.exact_moves)
    assert searched > 0
    play(family, 0)  # the same game again: every position is known
    assert len(family.expert.exact_moves) == searched
    assert len(OpenSpielFamily("tic_tac_toe", {}).expert.exact_moves) == 0  # its own memo


def test_a_kept_best_move_is_the_move_played() -> None:
    family = OpenSpielFamily("tic_tac_toe", {})
    opening = family._game.new_initial_state()
    assert family.expert.choose(opening, seed=0) == 0  # every opening draws: the first
    planted = OpenSpielFamily("tic_tac_toe", {})
    planted.expert.exact_moves.keep((), 8)
    assert planted.expert.choose(opening, seed=0) == 8  # the memo answers, not a new search


def test_boards_are_drawn_once_per_position_and_look_as_drawn_afresh() -> None:
    family = OpenSpielFamily("tic_tac_toe", {})
    play(family, 1)
    drawn = len(family.drawings)
    assert drawn > 0
    opening = tuple(family._game.new_initial_state().observation_tensor(0))
    assert family.drawings.get(opening) == render_board("tic_tac_toe", opening, 0)
    play(family, 1)  # the same positions again: nothing new to draw
    assert len(family.drawings) == drawn
