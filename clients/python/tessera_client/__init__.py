"""A Python client for Tessera's controller API (standard library only).

    from tessera_client import Client
    client = Client()                      # TESSERA_SERVER, TESSERA_TOKEN, or the config file
    job = client.submit({"name": "hello", "command": "echo hello"})
    job = client.wait(job)                 # the final Job: job.state, job.exit_code
    print(client.logs(job))

See Client for every method and clients/python/README.md for more examples.
"""

from ._errors import TesseraError
from ._job import TERMINAL_STATES, Job
from .client import Client, new_idempotency_key

__all__ = ["Client", "Job", "TesseraError", "TERMINAL_STATES", "new_idempotency_key"]
__version__ = "0.1.0"
