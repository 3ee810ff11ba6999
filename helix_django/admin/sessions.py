"""Chat sessions in the admin: owner, agent, current run, message count; messages, queued messages, runs inline."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from helix_django.admin import display
from helix_django.admin.run_layout import RunUsageColumns
from helix_django.models import ChatSession, Message, QueuedMessage, Run


class MessageInline(admin.TabularInline):
    """The session's active conversation rows, in order (read-only)."""

    model = Message
    fields = ("position", "role", "ui_id", "text_preview", "is_partial")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True
    verbose_name_plural = _("conversation")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Message]:
        return super().get_queryset(request).filter(position__isnull=False).order_by("position")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description=_("text"))
    def text_preview(self, obj: Message) -> str:
        text = obj.text
        return text if len(text) <= 120 else text[:119] + "…"

    @admin.display(boolean=True, description=_("partial"))
    def is_partial(self, obj: Message) -> bool:
        return bool((obj.metadata or {}).get("helix", {}).get("partial"))


class RunInline(RunUsageColumns, admin.TabularInline):
    """The session's generations (attempts), newest first, with their tokens and cost (read-only; open one to act)."""

    model = Run
    fields = ("id", "status", "kind", "attempt", "provider", "model", "tokens", "cost", "partial_chars", "created_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True
    ordering = ("-created_at",)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class QueuedMessageInline(admin.TabularInline):
    """Messages sent while an answer was written, to start after it (multitask ``enqueue``), oldest first (read-only).

    ``queued`` ones still wait; ``started`` ones link the run they started; ``removed`` ones
    their owner took back; ``refused`` ones name the typed error their start met.
    """

    model = QueuedMessage
    fields = ("id", "text_preview", "status", "run", "error_code", "created_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    verbose_name_plural = _("queued messages")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description=_("text"))
    def text_preview(self, obj: QueuedMessage) -> str:
        text = "".join(p.get("text", "") for p in obj.message.get("parts", []) if isinstance(p, dict))
        return text if len(text) <= 120 else text[:119] + "…"


@admin.register(ChatSession)
class ChatSessionAdmin(admin.ModelAdmin):
    """Sessions: who owns them, which agent, how their current generation is doing."""

    list_display = ("conversation", "owner_name", "agent", "current_run_status", "message_count", "updated")
    list_display_links = ("conversation",)
    list_select_related = ("owner", "current_run")
    list_filter = ("agent",)

    class Media:
        css = {"all": ("helix_django/admin.css",)}

    def get_search_fields(self, request: HttpRequest) -> tuple[str, ...]:
        """The id, the title, and the owner by the user model's ``USERNAME_FIELD``."""
        return ("id", "title", f"owner__{get_user_model().USERNAME_FIELD}")

    @admin.display(description=_("conversation"), ordering="title")
    def conversation(self, obj: ChatSession) -> str:
        return display.session_title(obj)

    @admin.display(description=_("owner"), ordering="owner")
    def owner_name(self, obj: ChatSession) -> str:
        return display.owner(obj)

    @admin.display(description=_("updated"), ordering="updated_at")
    def updated(self, obj: ChatSession) -> str:
        return display.timestamp(obj.updated_at, short=True)

    readonly_fields = (
        "id",
        "owner",
        "anonymous_key",
        "current_run",
        "message_count",
        "tokens",
        "cost",
        "created_at",
        "updated_at",
    )
    fields = (
        "id",
        "title",
        "owner",
        "anonymous_key",
        "agent",
        "current_run",
        "message_count",
        "tokens",
        "cost",
        "created_at",
        "updated_at",
    )
    inlines = (MessageInline, QueuedMessageInline, RunInline)

    @admin.display(description=_("tokens"))
    def tokens(self, obj: ChatSession) -> str:
        """What every run of the session cost, summed (helix_django/usage.py)."""
        return display.tokens(
            display.summed_usage(list(Run.objects.filter(session=obj).values_list("usage", flat=True)))
        )

    @admin.display(description=_("cost"))
    def cost(self, obj: ChatSession) -> str:
        """What every run of the session cost at its model's price, summed (helix_django/pricing.py)."""
        return display.runs_cost(list(Run.objects.filter(session=obj).values_list("model", "usage")))

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        # Only the title is editable: everything else is written by the store.
        return (*self.readonly_fields, "agent")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: ChatSession, form: Any, change: bool) -> None:
        """Save the title only: a full save would write back the current run and message count
        loaded with the page, undoing a run-start commit made meanwhile."""
        obj.save(update_fields=["title", "updated_at"])

    @admin.display(description=_("current generation"), ordering="current_run__status")
    def current_run_status(self, obj: ChatSession) -> str:
        run = obj.current_run
        return display.status_badge(run.status, run.get_status_display()) if run else "—"
