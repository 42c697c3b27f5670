"""Atrium settings, composed from one module per concern.

Everything comes from the environment with safe embedded defaults (DESIGN §1): with no
variables set you get the embedded profile (SQLite, in-memory channel layer, filesystem
Celery broker, local media). Setting DATABASE_URL / REDIS_URL / CELERY_BROKER_URL switches
to the production profile.
"""

from .atrium import *  # noqa: F401,F403
from .base import *  # noqa: F401,F403
from .database import *  # noqa: F401,F403
from .realtime import *  # noqa: F401,F403
from .security import *  # noqa: F401,F403
from .tasks import *  # noqa: F401,F403
