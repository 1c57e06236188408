"""Accounts: teams and memberships (member / admin), budgets, prices and spend."""

from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Accounts and teams"

    def ready(self) -> None:
        # sessions/ and approvals/ sit below accounts/: they ask for team and money facts
        # through hooks sessions/ owns, filled in here (issue 11 item 2: arrows point down).
        from django.db.models.signals import post_delete, post_save

        from accounts import budgets, pricing, spend, teams
        from accounts.models import RateOverride
        from sessions.hooks import money_register, teams_register

        # A saved or deleted override prices this process's next call at once.
        for signal in (post_save, post_delete):
            signal.connect(pricing.rate_overrides_clear, sender=RateOverride,
                           dispatch_uid=f"rate-overrides-clear-{signal is post_save}")

        teams_register(admin_team_ids=teams.admin_team_ids, team_ids=teams.team_ids,
                       team_admin_ids=teams.team_admin_ids, team_default=teams.team_default,
                       deny_rules=teams.deny_rules,
                       admin_only_classes=teams.admin_only_classes,
                       team_rules=teams.team_rules)
        money_register(
            budgeted=budgets.BudgetedTransport,
            has_budgets=lambda session: bool(budgets.budgets_for(session)),
            reservations_settle=budgets.reservations_settle,
            cost_fields=pricing.usage_cost_fields, session_costs=spend.session_costs,
            sessions_with_cost=spend.sessions_with_cost, usage_export=spend.usage_export,
            usage_reprice=pricing.usage_reprice)
