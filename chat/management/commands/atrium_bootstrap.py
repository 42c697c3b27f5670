from django.core.management.base import BaseCommand

from chat.bootstrap import ensure_demo


class Command(BaseCommand):
    help = "Create the demo workspace, an admin user and the example MCP servers (idempotent)."

    def handle(self, *args, **options) -> None:
        result = ensure_demo()
        if result.admin_password:
            self.stdout.write(
                self.style.SUCCESS(
                    f"\n  Admin login: {result.admin_username} / {result.admin_password}\n"
                    "  (shown once; change it in the admin)\n"
                )
            )
        else:
            self.stdout.write(
                f"  Admin user '{result.admin_username}' exists (password shown on first run)."
            )
        if result.created_servers:
            self.stdout.write(f"  Registered example servers: {', '.join(result.created_servers)}")
