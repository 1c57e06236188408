"""`python manage.py demo_user`: make sure the demo account exists and print how to log in.

The password is random, generated once and kept in DATA_DIR/demo_password (readable only by
its owner), so `make run` can print the same credentials every time without storing them
anywhere else. The demo user is a staff member and the admin of team "demo".
"""

from __future__ import annotations

import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from accounts.models import Membership, Team


class Command(BaseCommand):
    help = "Create (or repair) the demo user and print its credentials."

    def add_arguments(self, parser):
        parser.add_argument("--username", default="demo")

    def handle(self, *args, **options):
        username = options["username"]
        secret_file = settings.DATA_DIR / f"{username}_password"
        password = secret_file.read_text().strip() if secret_file.exists() else ""
        User = get_user_model()
        with transaction.atomic():
            user, created = User.objects.get_or_create(
                username=username, defaults={"is_staff": True, "is_superuser": True})
            if created or not password or not user.check_password(password):
                password = password or secrets.token_urlsafe(12)
                user.set_password(password)
                user.save()
                secret_file.write_text(password)
                secret_file.chmod(0o600)
            team, _ = Team.objects.get_or_create(name="demo")
            Membership.objects.get_or_create(user=user, team=team,
                                             defaults={"role": Membership.Role.ADMIN})
        self.stdout.write(f"  Log in as:  {username}")
        self.stdout.write(f"  Password:   {password}")
