"""A loopback Hugging Face hub for the tests: the server, its repositories, faults, the environment.

from tests.support.hub import HubServer, HubSizes, faults, hub_env, write_hub_repos

layouts = write_hub_repos(root, HubSizes())      # every repository the config can name
with HubServer(root) as hub:                      # http://127.0.0.1:<port>, one commit per repo
    hub.faults.add(faults.status(faults.REVISION_INFO, 503, count=2))
    subprocess.run(cmd, env=hub_env(hub, home))   # HF_ENDPOINT etc.; caches under home
    hub.requests.matching(faults.PARQUET, method="GET"), hub.requests.bytes_sent()
"""

from tests.support.hub import faults
from tests.support.hub.env import hub_env, hub_settings, reserve_socket, socket_url
from tests.support.hub.faults import Fault, Faults
from tests.support.hub.repos import REPOS, HubSizes, write_hub_repos
from tests.support.hub.server import HubServer, Request, RequestLog

__all__ = [
    "REPOS",
    "Fault",
    "Faults",
    "HubServer",
    "HubSizes",
    "Request",
    "RequestLog",
    "faults",
    "hub_env",
    "hub_settings",
    "reserve_socket",
    "socket_url",
    "write_hub_repos",
]
