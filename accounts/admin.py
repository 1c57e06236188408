"""Django admin for teams, memberships, budgets and operator rate overrides (staff only)."""

from django.contrib import admin
from django.db import models, transaction

from accounts.forms import UsdDecimalField
from accounts.models import Budget, Membership, RateOverride, Team
from accounts.services import budget_audit


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["name", "created_at"]
    search_fields = ["name"]
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "team", "role"]
    list_filter = ["role", "team"]
    search_fields = ["user__username", "team__name"]


@admin.register(Budget)
class BudgetAdmin(admin.ModelAdmin):
    """Staff set any cap here; each save or delete is an AuditEntry like a change on /spend/."""

    list_display = ["scope", "team", "user", "session", "period", "limit_usd", "unknown_policy",
                    "updated_at"]
    list_filter = ["scope", "period", "unknown_policy"]
    raw_id_fields = ["user", "session", "updated_by"]
    # Amounts go through the one parser of typed money (accounts/money.py amount_text).
    formfield_overrides = {models.DecimalField: {"form_class": UsdDecimalField}}
    readonly_fields = ["updated_by", "updated_at"]

    def save_model(self, request, obj, form, change):
        before = Budget.objects.filter(pk=obj.pk).values_list("limit_usd", flat=True).first()
        obj.updated_by = request.user
        with transaction.atomic():
            super().save_model(request, obj, form, change)
            budget_audit(actor=request.user, budget=obj, action="budget.set", before=before,
                         after=obj.limit_usd)

    def delete_model(self, request, obj):
        with transaction.atomic():
            budget_audit(actor=request.user, budget=obj, action="budget.removed",
                         before=obj.limit_usd, after=None)
            super().delete_model(request, obj)

    def delete_queryset(self, request, queryset):
        with transaction.atomic():
            for obj in queryset:
                budget_audit(actor=request.user, budget=obj, action="budget.removed",
                             before=obj.limit_usd, after=None)
            super().delete_queryset(request, queryset)


@admin.register(RateOverride)
class RateOverrideAdmin(admin.ModelAdmin):
    """Operator rates (USD per million tokens; blank = the library's); validated by the
    model's clean (unknown provider, negative or non-numeric rate → form error). Run
    `manage.py hermes reprice` to apply a change to past usage."""

    list_display = ["provider", "model", "input", "output", "cache_read", "cache_write_5m",
                    "cache_write_1h", "updated_at"]
    search_fields = ["provider", "model"]
    formfield_overrides = {models.DecimalField: {"form_class": UsdDecimalField}}
