"""The PostgreSQL server the tests use: these machines run one at 127.0.0.1:5432."""

import os

POSTGRES_URL = os.environ.get("AGENTD_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
