from django.core.management.base import BaseCommand, CommandParser

from chat.media.selectors import staged_asset_ids
from chat.media.tasks import requeue_staged


class Command(BaseCommand):
    help = (
        "Re-enqueue persist_tool_media for every media asset still staged after N seconds "
        "(for a broker that lost messages). Safe to repeat: the task is idempotent."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--older-than",
            type=float,
            default=300.0,
            metavar="SECONDS",
            help="only assets staged at least this long ago (default: 300)",
        )
        parser.add_argument("--limit", type=int, default=None, help="at most this many assets")
        parser.add_argument(
            "--dry-run", action="store_true", help="list the assets, enqueue nothing"
        )

    def handle(self, *args, older_than: float, limit: int | None, dry_run: bool, **options) -> None:
        if dry_run:
            ids = staged_asset_ids(older_than=older_than, limit=limit)
            self.stdout.write(f"{len(ids)} staged asset(s) would be re-enqueued: {ids}")
            return

        ids = requeue_staged(older_than=older_than, limit=limit)
        self.stdout.write(f"Re-enqueued {len(ids)} staged asset(s): {ids}")
