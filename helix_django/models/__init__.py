"""helix_django models: sessions, messages, queued messages, runs, checkpoints, tool executions, stream chunks."""

from helix_django.models.checkpoint import Checkpoint, CheckpointKind
from helix_django.models.chunk import Stream, StreamChunk, StreamStatus
from helix_django.models.message import Message
from helix_django.models.queued_message import QueuedMessage, QueuedMessageStatus
from helix_django.models.run import LIVE_STATUSES, TERMINAL_STATUSES, CancelledBy, Run, RunStatus
from helix_django.models.session import ChatSession
from helix_django.models.tool_execution import ToolEffect, ToolExecution, ToolExecutionStatus

__all__ = [
    "LIVE_STATUSES",
    "TERMINAL_STATUSES",
    "ChatSession",
    "Checkpoint",
    "CheckpointKind",
    "Message",
    "QueuedMessage",
    "QueuedMessageStatus",
    "Run",
    "RunStatus",
    "CancelledBy",
    "Stream",
    "StreamChunk",
    "StreamStatus",
    "ToolEffect",
    "ToolExecution",
    "ToolExecutionStatus",
]
