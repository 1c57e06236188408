"""Accounts: teams and memberships (member / admin)."""

from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Accounts and teams"
