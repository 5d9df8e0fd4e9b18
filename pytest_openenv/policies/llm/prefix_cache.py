"""Attention keys and values of prompt prefixes, kept between turns and episodes.

An agent's conversation grows by a reply and an observation per turn, and every episode of a
run opens with the same system prompt and tool list: re-encoding the whole prompt at every
turn was nine tenths of a local model's time on a CPU. This store keeps the keys and values
of the prompt in fixed blocks of tokens, each computed by one forward pass of that block
over the blocks before it. A block's numbers therefore depend only on the tokens up to its
end, never on which conversation computed it first or on what else the process has played:
a prompt gets the same reply from a cold store as from a warm one, in any run and on any
worker, which is what keeps a greedy evaluation repeatable.

The store is bounded (least recently used blocks go first) and belongs to one loaded model.
"""

from __future__ import annotations

import inspect
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

#: tokens per block: larger blocks mean fewer forward passes, smaller ones less of the
#: prompt's tail encoded afresh each turn
BLOCK_TOKENS = 32
#: what the blocks of one process may hold (SmolLM2-135M: 46 KB per token, about 11,000
#: tokens: the shared opening and the recent turns of a few dozen conversations)
DEFAULT_BUDGET_BYTES = 512 * 1024 * 1024


@dataclass
class Block:
    """One block's keys and values, layer by layer (each ``[1, heads, BLOCK, head_dim]``)."""

    keys: list[Any]
    values: list[Any]

    def nbytes(self) -> int:
        return sum(t.element_size() * t.nelement() for t in (*self.keys, *self.values))


def supports_block_prefill(model: Any) -> bool:
    """Whether blocks can be put together for this model: a decoder whose every layer
    attends to the whole past (a sliding window or a recurrent state would make a block's
    numbers depend on more than the tokens before it)."""
    config = getattr(model, "config", None)
    if config is None or getattr(config, "is_encoder_decoder", False):
        return False
    if getattr(config, "sliding_window", None) and getattr(config, "use_sliding_window", True):
        return False
    layer_types = getattr(config, "layer_types", None) or ()
    return all(kind == "full_attention" for kind in layer_types)


class PrefixStore:
    """Blocks keyed by the whole token prefix they end, in least-recently-used order."""

    def __init__(
        self,
        cache_keyword: str = "past_key_values",
        budget_bytes: int = DEFAULT_BUDGET_BYTES,
        block: int = BLOCK_TOKENS,
    ):
        #: the keyword the model's forward and generate take the cache by (``cache_argument``)
        self.cache_keyword = cache_keyword
        self.block = block
        self.budget_bytes = budget_bytes
        #: (id of the previous block's node, this block's tokens) -> node id
        self._nodes: dict[tuple[int, tuple[int, ...]], int] = {}
        self._blocks: OrderedDict[int, tuple[tuple[int, tuple[int, ...]], Block]] = OrderedDict()
        self._next_id = 1
        self.held_bytes = 0
        #: prompt tokens found in the store and computed, over the store's life
        self.reused_tokens = 0
        self.computed_tokens = 0

    def prefill(self, torch: Any, model: Any, input_ids: Any) -> Any | None:
        """A cache of ``input_ids``' whole blocks for ``generate``, which then encodes only the
        rest (at least one token); None for a prompt shorter than a block and one token."""
        from transformers import DynamicCache

        tokens = input_ids[0].tolist()
        whole = (len(tokens) - 1) // self.block
        cache = DynamicCache()
        parent, found = 0, []
        for index in range(whole):
            chunk = tuple(tokens[index * self.block : (index + 1) * self.block])
            node = self._nodes.get((parent, chunk))
            if node is None:
                break
            self._blocks.move_to_end(node)
            found.append(self._blocks[node][1])
            parent = node
        if found:  # one concatenation per layer, not one per block
            for layer in range(len(found[0].keys)):
                cache.update(
                    torch.cat([block.keys[layer] for block in found], dim=2),
                    torch.cat([block.values[layer] for block in found], dim=2),
                    layer,
                )
        reused = covered = len(found) * self.block
        with torch.inference_mode():
            while covered < whole * self.block:
                chunk = tuple(tokens[covered : covered + self.block])
                piece = input_ids[:, covered : covered + self.block].to(model.device)
                positions = torch.arange(covered, covered + self.block, device=model.device)
                model(
                    input_ids=piece,
                    **{self.cache_keyword: cache},
                    use_cache=True,
                    cache_position=positions,
                    position_ids=positions.unsqueeze(0),
                )
                parent = self._keep(parent, chunk, last_block(cache, self.block))
                covered += self.block
        self.reused_tokens += reused
        self.computed_tokens += covered - reused
        return cache if covered else None

    def _keep(self, parent: int, chunk: tuple[int, ...], block: Block) -> int:
        key = (parent, chunk)
        node = self._next_id
        self._next_id += 1
        self._nodes[key] = node
        self._blocks[node] = (key, block)
        self.held_bytes += block.nbytes()
        while self.held_bytes > self.budget_bytes and len(self._blocks) > 1:
            _, (old_key, old) = self._blocks.popitem(last=False)
            del self._nodes[old_key]
            self.held_bytes -= old.nbytes()
        return node

    def clear(self) -> None:
        self._nodes.clear()
        self._blocks.clear()
        self.held_bytes = 0


def cache_argument(model: Any) -> str:
    """The keyword a model's forward and generate take the cache by: transformers 5 renamed
    ``past_key_values`` to ``cache`` (the old name warns, then goes)."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def layer_tensors(cache: Any) -> list[tuple[Any, Any]]:
    """(keys, values) of each layer, across the cache layouts transformers has used."""
    layers = getattr(cache, "layers", None)
    if layers is not None:
        return [(layer.keys, layer.values) for layer in layers]
    return list(zip(cache.key_cache, cache.value_cache, strict=True))


def last_block(cache: Any, size: int) -> Block:
    """Copies of the last ``size`` positions: views would keep the whole cache alive."""
    keys, values = [], []
    for layer_keys, layer_values in layer_tensors(cache):
        keys.append(layer_keys[:, :, -size:, :].clone())
        values.append(layer_values[:, :, -size:, :].clone())
    return Block(keys=keys, values=values)
