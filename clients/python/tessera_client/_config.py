"""Where the client's server, token and TLS settings come from.

Each setting: the argument given to Client, else the environment (as the `tessera`
command reads it), else the config file ``$XDG_CONFIG_HOME/tessera/config.json``
(default ``~/.config/tessera/config.json``) that `tessera login` writes (keys
``server`` and ``token``), else the default.
"""

import json
import os

DEFAULT_SERVER = "http://127.0.0.1:7450"
DEFAULT_FAILOVER_TIMEOUT = 60.0


def config_path(env):
    """The config file `tessera login` writes: $XDG_CONFIG_HOME/tessera/config.json, or
    ~/.config/tessera/config.json (an XDG_CONFIG_HOME that is not absolute is ignored, as
    the XDG specification says)."""
    xdg = env.get("XDG_CONFIG_HOME", "")
    if xdg and os.path.isabs(xdg):
        return os.path.join(xdg, "tessera", "config.json")
    home = env.get("HOME") or os.path.expanduser("~")
    return os.path.join(home, ".config", "tessera", "config.json")


def _read_config(path):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ValueError("cannot read the config file %s: %s" % (path, exc)) from None
    if not isinstance(doc, dict):
        raise ValueError("the config file %s is not a JSON object" % path)
    out = {}
    for key in ("server", "token"):
        value = doc.get(key)
        if isinstance(value, str) and value.strip():
            out[key] = value.strip()
    return out


def _has_control_character(text):
    return any(ord(c) < 0x20 or ord(c) == 0x7F for c in text)


def _same_servers(a, b):
    def norm(servers):
        return [s.strip().rstrip("/") for s in servers.split(",") if s.strip()]
    return norm(a) == norm(b)


def resolve(server=None, token=None, ca_cert=None, insecure=False, env=None):
    """Returns (server, token, ca_cert, insecure, sources) with the precedence above.

    The config file's token is used only with the config file's server (or when no
    server was given otherwise), so that a token meant for one cluster is never sent to
    another named by TESSERA_SERVER. `sources` says where server and token came from.
    Raises ValueError for an unreadable or empty TESSERA_TOKEN_FILE, a token with control
    characters, an unreadable config file (only when it is needed) or CA file.
    """
    env = os.environ if env is None else env

    def from_env(name):
        return (env.get(name) or "").strip()

    sources = {}
    config = None
    if server:
        sources["server"] = "argument"
    elif from_env("TESSERA_SERVER"):
        server = from_env("TESSERA_SERVER")
        sources["server"] = "TESSERA_SERVER"
    if token:
        sources["token"] = "argument"
    elif from_env("TESSERA_TOKEN"):
        token = from_env("TESSERA_TOKEN")
        sources["token"] = "TESSERA_TOKEN"
    elif from_env("TESSERA_TOKEN_FILE"):
        path = from_env("TESSERA_TOKEN_FILE")
        try:
            with open(path, encoding="utf-8") as f:
                token = f.read().strip()
        except OSError:
            raise ValueError("cannot read the token file '%s' named by TESSERA_TOKEN_FILE"
                             % path) from None
        if not token:
            raise ValueError("the token file '%s' is empty" % path)
        sources["token"] = "TESSERA_TOKEN_FILE"
    if not server or not token:
        path = config_path(env)
        config = _read_config(path)
        if not server and "server" in config:
            server = config["server"]
            sources["server"] = path
        if not token and "token" in config and \
                (sources.get("server") == path or not server or
                 _same_servers(server, config.get("server", DEFAULT_SERVER))):
            token = config["token"]
            sources["token"] = path
    if not server:
        server = DEFAULT_SERVER
        sources["server"] = "default"
    token = token or ""
    if _has_control_character(token):
        raise ValueError("the token holds control characters")
    ca_cert = ca_cert or from_env("TESSERA_CA_CERT") or None
    if ca_cert and not os.access(ca_cert, os.R_OK):
        raise ValueError("cannot read the CA certificate file '%s'" % ca_cert)
    insecure = bool(insecure) or from_env("TESSERA_INSECURE").lower() in ("1", "true", "yes")
    return server, token, ca_cert, insecure, sources


def failover_timeout(value=None, env=None):
    """The seconds a request may go on trying several controllers: `value` (a number from
    0 up), else TESSERA_FAILOVER_TIMEOUT (whole seconds, 0..86400, as the `tessera`
    command reads it), else 60. Raises ValueError for anything else."""
    if value is None:
        env = os.environ if env is None else env
        text = (env.get("TESSERA_FAILOVER_TIMEOUT") or "").strip()
        if not text:
            return DEFAULT_FAILOVER_TIMEOUT
        try:
            seconds = int(text, 10)
        except ValueError:
            seconds = -1
        if not 0 <= seconds <= 86400:
            raise ValueError("TESSERA_FAILOVER_TIMEOUT must be a whole number of seconds from "
                             "0 to 86400, got '%s'" % text)
        return float(seconds)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not 0 <= value < float("inf"):
        raise ValueError("failover_timeout must be a number of seconds from 0 up, got %r"
                         % (value,))
    return float(value)
