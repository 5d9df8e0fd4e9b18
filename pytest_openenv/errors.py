"""Every exception pytest-openenv raises on purpose, and what each makes of a run.

What can go wrong falls into three outcomes (docs/architecture.md), and the
hierarchy follows them, so ``except InfrastructureFault`` or ``except BadInput``
says which one a handler deals with:

- **bad input** (``BadInput``): something the user gave is wrong (an option, the
  env config, the ini file, the output folder, the server named, the chat
  template). The run stops with ``pytest.UsageError`` (exit 4) before any episode
  runs, ``python -m pytest_openenv`` with exit 2; the message names the option and
  what would be right.
- **an error** (``InfrastructureFault``): something outside the agent broke (a
  server down or answering garbage, a dropped connection, a model endpoint that
  refuses the key, the episode's time limit). The item *errors* during setup and
  its row goes to ``failures.jsonl`` with ``failure.outcome = "error"``; with a
  gate set it counts as not passed.
- **a failure** (``AgentFault``): the agent's own doing. A refused move is a tool
  error the policy sees and pays a turn for (the episode goes on); a conversation
  that outgrew the model's context ends the episode unfinished. Either way the
  env's verdict decides: an agent that loses or answers wrongly *fails* its item
  (``failure.outcome = "failed"``), it never errors.

Publishing is apart (``PushError``): a failed upload leaves every local file
intact and prints the command to retry; it is not an episode outcome.

The builtin bases are kept where callers catch them: the ``ValueError`` ones are
raised by parsers, and ``ServerUnreachable`` is a ``ConnectionError``.

Hierarchy::

    OpenEnvError
     ├── BadInput                     -> pytest.UsageError (exit 4), before any episode
     │    ├── EnvConfigError          (ValueError) bad env spec or env config
     │    ├── ServerURLError          (ValueError) a --openenv-server value that is no URL
     │    ├── JSONTooDeep             (ValueError) JSON nested past MAX_JSON_DEPTH
     │    ├── CorruptLine             (ValueError) a results.jsonl line on resume, file:line
     │    ├── NotARegularFile         (OSError) a results.jsonl that is /dev/zero or a FIFO
     │    ├── IniValueUnreadable      an ini value pytest refused and the file cannot show
     │    ├── FolderLocked            another live run holds the output folder
     │    ├── ServerMismatch          a server hosts another env than the run names
     │    ├── TemplateNotFound        (ValueError) no chat template where the user pointed
     │    ├── TemplateFailure         the chat template does not compile or cannot render
     │    │    └── RenderTimeout      it renders past its bound (a loop without end)
     │    ├── CheckpointProblem       ``--openenv-model`` names no checkpoint transformers can load
     │    ├── ViewError               ``python -m pytest_openenv view``: bad folder, host, port
     │    ├── RescoreError            ``python -m pytest_openenv rescore``: bad folder or options
     │    ├── ShardsRefused           ``merge``: folders that are not the shards of one run
     │    ├── HarnessParameterError   (ValueError) an OpenEnv ``eval_parameters`` key we lack
     │    ├── TrainingSetupError      (ValueError) ``pytest_openenv.trl``: a tool TRL cannot
     │    │                           call, a dataset row without a seed
     │    └── AgentUnavailable        ``agent:NAME`` unknown, its program not on PATH, no template
     ├── InfrastructureFault          -> the item ERRORS (setup), row in failures.jsonl
     │    ├── EpisodeError            what run_episode raises for any fault below
     │    │    ├── EpisodeTimeout     over --openenv-timeout
     │    │    ├── JudgeFailed        the judge model gave no usable verdict (--openenv-judge)
     │    │    └── AgentProgramFault  an agent program crashed, flooded its output, left no answer
     │    ├── EnvUnavailable          server down, connection dropped, engine crash
     │    │    ├── CannotConnect      no session could be opened; nothing was sent
     │    │    ├── CapacityReached    every session of the server is taken
     │    │    ├── NoServerInRotation every server the episode could use is benched
     │    │    └── GenerationTimeout  a reasoning_gym dataset gave no question in time
     │    ├── PolicyUnavailable       transport, auth, replay miss: no answer from the policy
     │    │    ├── AnswerTooLarge     a model answer past MAX_ANSWER_BYTES (util/jsonlimits.py)
     │    │    └── CacheUnwritable    --openenv-cache takes no entry (full disk): the run stops
     │    ├── ServerUnreachable       (ConnectionError) a plain HTTP request to a server
     │    ├── EndpointFault           a chat request over http.client failed after its retries
     │    │    ├── EndpointTimeout    no whole answer within the request's time
     │    │    ├── EndpointUnreachable the connection failed or closed without an answer
     │    │    ├── EndpointStatus     an HTTP status the retries could not turn into a 2xx
     │    │    └── UpstreamError      the capture proxy's upstream gave an agent no answer
     │    └── ExpertError             OpenSpiel's bots cannot play this game
     ├── AgentFault                   -> scored by the env's verdict: a FAILURE, never an error
     │    ├── ActionRejected          the env refused an action: a tool error, play goes on
     │    ├── StatefulRequest         (ValueError) an agent continues a response never kept
     │    └── ContextExhausted        the model's context is full: the episode ends unfinished
     ├── PushError                    the upload did not happen; local files intact
     │    └── NotAnOutputFolder       the folder lacks the files the plugin writes
     ├── HarnessRunFailed             (RuntimeError) ``openenv_harness``: a run gave no figures
     └── EvaluationRunFailed          (RuntimeError) ``trl.EvalCallback``: a run gave no figures

A fault that reaches the episode loop becomes ``EpisodeError`` there (with the
episode id in its message), so the fixture has one exception to turn into the
setup error. Before any episode, the controller's preflight makes what it finds a
usage error instead (a server that fails ``GET /health``, one that hosts another
env): every item would only error. ``ServerMismatch`` found in an episode (a
server swapped mid-run) the loop raises again as ``EpisodeError``.

Leaf of the package: it imports nothing of pytest-openenv, so any layer may use it.
"""

from __future__ import annotations

import errno
from pathlib import Path


class OpenEnvError(Exception):
    """The base of every exception pytest-openenv raises on purpose."""


# -- bad input: pytest.UsageError before any episode ---------------------------------------
class BadInput(OpenEnvError):
    """Something the user gave is wrong; the run stops with a usage error naming it."""


class EnvConfigError(BadInput, ValueError):
    """Bad env spec or env config; surfaced to the user as a pytest usage error."""


class ServerURLError(BadInput, ValueError):
    """A ``--openenv-server`` value that is not a usable URL."""


class JSONTooDeep(BadInput, ValueError):
    """Nested deeper than ``MAX_JSON_DEPTH`` (``util/jsonlimits.py``)."""


class CorruptLine(BadInput, ValueError):
    """A line of a ``results.jsonl``-style file that is not an episode record."""

    def __init__(self, path: Path, line: int, problem: str) -> None:
        super().__init__(f"{path}:{line}: {problem}")
        self.path = path
        self.line = line


class NotARegularFile(BadInput, OSError):
    """A ``results.jsonl``-style path that is a device, FIFO or socket (``/dev/zero``), not a
    file: reading it would never end, or never start."""

    def __init__(self, path: Path, kind: str) -> None:
        super().__init__(errno.EINVAL, f"{path} is {kind}, not a regular file")
        self.path = path


class IniValueUnreadable(BadInput):
    """pytest refused an ini value and the file does not say it either."""


class FolderLocked(BadInput):
    """Another live run holds the output folder; the message names it."""


class ServerMismatch(BadInput):
    """A server hosts something other than the env the run names."""


class TemplateNotFound(BadInput, ValueError):
    """No chat template where the user pointed; the message says where we looked."""


class TemplateFailure(BadInput):
    """The template does not compile, or raised while rendering a conversation.

    Found before the run it is a usage error; rendering a row after it, a problem the
    check reports for that row.
    """


class RenderTimeout(TemplateFailure):
    """A chat template still rendering past its bound (``util/deadline.py``): it loops."""


class CheckpointProblem(BadInput):
    """``--openenv-model`` names no usable checkpoint; the message says why and what would do."""


class ViewError(BadInput):
    """A problem with the arguments or the folder: printed as one line, exit code 2."""


class RescoreError(BadInput):
    """``rescore``: bad arguments or a folder it cannot rescore; one line, exit code 2."""


class ShardsRefused(BadInput):
    """``python -m pytest_openenv merge``: the folders are not the whole of one sharded run
    (another run's, a shard twice, a shard missing): nothing is written, exit code 4."""


# -- infrastructure faults: the item errors -----------------------------------------------
class InfrastructureFault(OpenEnvError):
    """Something outside the agent broke; the episode's item errors instead of failing."""


class EpisodeError(InfrastructureFault):
    """An episode could not be run to its end for reasons outside the agent.

    ``partial`` is what was played before the fault (an ``episode.result.Episode``):
    its transcript, turns and the tokens the endpoint billed, which the errored row
    keeps; None when the fault came before any turn.
    """

    partial: object | None = None


class EpisodeTimeout(EpisodeError):
    """The episode ran over ``--openenv-timeout``."""


class JudgeFailed(EpisodeError):
    """The judge model gave no usable verdict: no answer, an answer that is not the verdict's
    JSON, a refusal, or its endpoint failing after its retries. Not the agent's doing, so the
    item errors (never fails) and the run counts it apart (``judge_errors``). ``usage``: the
    tokens the judge spent on it (a ``policies.base.Usage``), which the run counts."""

    usage: object | None = None


class AgentProgramFault(EpisodeError):
    """An agent program (``agent:NAME``) failed as a program: it exited with an error
    before the env ended the episode, or flooded its output. Losing is not this: an agent
    that plays and loses is judged by the env like any policy."""


class EnvUnavailable(InfrastructureFault):
    """An infrastructure fault: server down, connection dropped, engine crash.

    The episode becomes a setup *error*, not a failure of the agent.
    """


class CannotConnect(EnvUnavailable):
    """No session could be opened (refused, handshake failed or timed out): nothing was sent."""


class CapacityReached(EnvUnavailable):
    """The server refused a new session because all of its sessions are taken.

    Retried while a session is being opened; anywhere else it is a plain fault.
    """


class NoServerInRotation(EnvUnavailable):
    """Every server this episode could use is out of rotation."""


class GenerationTimeout(EnvUnavailable):
    """The dataset did not produce its question in time."""


class PolicyUnavailable(InfrastructureFault):
    """The policy cannot answer for reasons outside the agent (transport, auth, replay miss).

    The episode becomes a setup *error*.
    """


class CacheUnwritable(PolicyUnavailable):
    """``--openenv-cache`` cannot take an entry (a full disk, EFBIG): the run stops, as for a
    full output disk, instead of paying for model calls it cannot keep."""


class AnswerTooLarge(PolicyUnavailable):
    """A model answer (its HTTP body, or a policy's reply) past ``MAX_ANSWER_BYTES``.

    No ``--openenv-max-tokens`` a model honours comes near it: the endpoint ignores the
    limit or is not a model, and reading on would cost memory without bound.
    """


class EndpointFault(InfrastructureFault):
    """A chat request over ``http.client`` failed after its retries (``policies/llm/http_client``).

    Raised inside the policy only: it turns each into a ``PolicyUnavailable`` (or
    ``ContextExhausted``) with the same words the SDK path uses.
    """


class EndpointTimeout(EndpointFault):
    """No whole answer within the request's time (connect, send, headers and body)."""


class EndpointUnreachable(EndpointFault):
    """The connection failed or closed without an answer; ``__cause__`` says how."""


class EndpointStatus(EndpointFault):
    """An HTTP status the retries could not turn into a 2xx."""

    def __init__(self, status_code: int, body: object, headers: dict[str, str]) -> None:
        #: the body as JSON when it parses, else its text
        self.status_code = status_code
        self.body = body
        self.headers = headers
        self.message = f"Error code: {status_code}" + (f" - {body}" if body else "")
        super().__init__(self.message)


class UpstreamError(EndpointFault):
    """The capture proxy's upstream model gave an agent program no answer: ``status`` is what
    the agent is told (502 unreachable, 504 too slow), ``message`` why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class ServerUnreachable(InfrastructureFault, ConnectionError):
    """A plain HTTP request to a server failed; the message never holds credentials."""


class ExpertError(InfrastructureFault):
    """The expert cannot play this game (the reason is in the message)."""


# -- the agent's doing: scored, never an error ----------------------------------------------
class AgentFault(OpenEnvError):
    """The agent's own doing: the env's verdict scores it; the item fails, never errors."""


class ActionRejected(AgentFault):
    """The env refused an action (illegal move, validation error).

    The message goes back to the policy as a tool error; the episode goes on.
    """


class StatefulRequest(AgentFault, ValueError):
    """An agent program's Responses request continues a stored response
    (``previous_response_id``) the capture proxy never keeps: refused to the agent (400)."""


class ContextExhausted(AgentFault):
    """The conversation no longer fits the model's context window (an HTTP 400 saying so).

    Asking again cannot help, and the limit is the model's, not the infrastructure's:
    the episode ends unfinished, a *failure* with this reason (inspect-ai's
    ``model_length`` stop), never an error.
    """


# -- publishing ---------------------------------------------------------------------------
class PushError(OpenEnvError):
    """The upload did not happen; the message never contains the token."""


class NotAnOutputFolder(PushError):
    """The folder lacks the files the plugin writes."""


# -- running from OpenEnv's eval API ------------------------------------------------------
class HarnessParameterError(BadInput, ValueError):
    """An ``eval_parameters`` key or value that maps onto no option of the plugin."""


class HarnessRunFailed(OpenEnvError, RuntimeError):
    """The pytest run behind an ``EvalHarness.run`` ended without figures (a usage error,
    an internal error, nothing collected, a time limit): the message says which, with the
    end of its output."""


class TrainingSetupError(BadInput, ValueError):
    """``pytest_openenv.trl``: an env tool TRL cannot expose as a method (a name that is no
    identifier, or one the environment class needs), or a dataset row without a ``seed``."""


class AgentUnavailable(BadInput):
    """``--openenv-policy=agent:NAME`` cannot be started: no agent of that name, its
    program is not on PATH, or ``agent:command`` has no usable ``--openenv-agent-command``."""


class EvaluationRunFailed(OpenEnvError, RuntimeError):
    """``pytest_openenv.trl.EvalCallback``: the run of one evaluation ended without figures
    (a usage error, an internal error, nothing collected); the message gives its exit code."""
