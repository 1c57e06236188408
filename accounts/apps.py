"""Accounts: teams and memberships (member / admin), budgets, prices and spend."""

from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Accounts and teams"

    def ready(self) -> None:
        # sessions/ and approvals/ sit below accounts/: they ask for team and money facts
        # through hooks sessions/ owns, filled in here (issue 11 item 2: arrows point down).
        from accounts import budgets, pricing, spend, teams
        from sessions.hooks import money_register, teams_register

        teams_register(admin_team_ids=teams.admin_team_ids, team_ids=teams.team_ids,
                       team_admin_ids=teams.team_admin_ids, team_default=teams.team_default,
                       deny_rules=teams.deny_rules)
        money_register(
            budgeted=budgets.BudgetedTransport,
            has_budgets=lambda session: bool(budgets.budgets_for(session)),
            reservations_settle=budgets.reservations_settle,
            cost_fields=pricing.usage_cost_fields, session_costs=spend.session_costs,
            sessions_with_cost=spend.sessions_with_cost, usage_export=spend.usage_export,
            usage_reprice=pricing.usage_reprice)
