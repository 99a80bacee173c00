from django.core.management.base import BaseCommand, CommandError

from accounts.services import token_for, user_create
from common.errors import ApplicationError
from common.roles import Role


class Command(BaseCommand):
    help = "Create a user with roles and print an API token."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--password", required=True)
        parser.add_argument("--roles", default="annotator", help=f"comma-separated: {', '.join(r.value for r in Role)}")
        parser.add_argument("--superuser", action="store_true")

    def handle(self, *args, username, password, roles, superuser, **options):
        try:
            user = user_create(username=username, password=password, roles=[r for r in roles.split(",") if r],
                               is_superuser=superuser)
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(f"created {username}; API token {token_for(user=user)}")
