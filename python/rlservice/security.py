"""Channels through the service's locked doors, as common/security.h makes
them in C++: TLS when a CA is given, gRPC's local credentials to a loopback
target, plaintext otherwise (or always, with insecure=True); the bearer
token from a file rides on every call (never on plaintext). A token file or
client certificate given for a target off loopback without a CA is an error
(it could not be used), not plaintext.

Defaults come from the environment: RL_TOKEN_FILE (else runs/auth/user.token,
which the embedded coordinator writes, when it exists), RL_TLS_CA,
RL_TLS_CERT, RL_TLS_KEY, RL_TLS_SERVER_NAME, RL_INSECURE=1."""

import dataclasses
import ipaddress
import os

import grpc

LOCAL_USER_TOKEN = os.path.join("runs", "auth", "user.token")


@dataclasses.dataclass
class Security:
    token_file: str = None
    tls_ca: str = None
    tls_cert: str = None
    tls_key: str = None
    tls_server_name: str = None
    insecure: bool = False
    # token_file is runs/auth/user.token, found rather than given: the
    # embedded coordinator's, for loopback, so left out elsewhere.
    token_file_found: bool = False

    @classmethod
    def from_env(cls, **overrides):
        env = os.environ.get
        security = cls(token_file=env("RL_TOKEN_FILE"), tls_ca=env("RL_TLS_CA"),
                       tls_cert=env("RL_TLS_CERT"), tls_key=env("RL_TLS_KEY"),
                       tls_server_name=env("RL_TLS_SERVER_NAME"),
                       insecure=env("RL_INSECURE", "") not in ("", "0"))
        for name, value in overrides.items():
            if value not in (None, False, ""):
                setattr(security, name, value)
        if not security.token_file and os.path.exists(LOCAL_USER_TOKEN):
            security.token_file, security.token_file_found = LOCAL_USER_TOKEN, True
        return security


def _read(path, what):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise ValueError(f"{what}: cannot read {path} ({e.strerror})") from None


def is_loopback(target):
    host = target
    for prefix in ("ipv4:", "ipv6:", "dns:///"):
        if host.startswith(prefix):
            host = host[len(prefix):]
    if host.startswith("["):
        host = host[1:host.find("]")]
    elif host.count(":") == 1:
        host = host.rsplit(":", 1)[0]
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_target(target, flag="--coordinator"):
    """ValueError naming `flag` unless `target` is HOST:PORT with a port in
    1-65535 (gRPC would wrap 99999 round to 34463, and dial a stranger)."""
    if not target:
        raise ValueError(f"{flag}: empty (give HOST:PORT)")
    host, sep, port = str(target).rpartition(":")
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"{flag}: {str(target)[:200]!r} is not HOST:PORT with a port in 1-65535")
    return target


def check_security(security, target):
    """ValueError naming the flags for settings that cannot work together:
    a client certificate without its key (or the reverse; gRPC would abort
    the process), or, for a target off loopback without --tls-ca, a token
    or client certificate that would be left out for plaintext."""
    if security.tls_cert and not security.tls_key:
        raise ValueError("--tls-cert (or RL_TLS_CERT) given without --tls-key (RL_TLS_KEY): "
                         "a client certificate needs its key")
    if security.tls_key and not security.tls_cert:
        raise ValueError("--tls-key (or RL_TLS_KEY) given without --tls-cert (RL_TLS_CERT): "
                         "a client key needs its certificate")
    if security.insecure or security.tls_ca or is_loopback(target):
        return
    unused = []
    if security.token_file and not security.token_file_found:
        unused.append("--token-file (or RL_TOKEN_FILE)")
    if security.tls_cert:
        unused.append("--tls-cert/--tls-key")
    if unused:
        raise ValueError(
            f"{' and '.join(unused)} given for {target}, which is not loopback, without "
            "--tls-ca: give --tls-ca (or RL_TLS_CA) to speak TLS, or --insecure for a "
            "plaintext server without tokens")


def make_channel(target, options=(), security=None, flag="--coordinator"):
    """A grpc.Channel to `target` through `security` (default: from_env).
    ValueError (naming `flag`) for a target that is not HOST:PORT, naming
    the flags for settings check_security refuses."""
    check_target(target, flag)
    security = security or Security.from_env()
    check_security(security, target)
    options = list(options)
    if security.insecure:
        return grpc.insecure_channel(target, options=options)
    if security.tls_ca:
        credentials = grpc.ssl_channel_credentials(
            root_certificates=_read(security.tls_ca, "--tls-ca"),
            private_key=_read(security.tls_key, "--tls-key") if security.tls_key else None,
            certificate_chain=_read(security.tls_cert, "--tls-cert") if security.tls_cert else None)
        if security.tls_server_name:
            options.append(("grpc.ssl_target_name_override", security.tls_server_name))
    elif is_loopback(target):
        credentials = grpc.local_channel_credentials(grpc.LocalConnectionType.LOCAL_TCP)
    else:
        return grpc.insecure_channel(target, options=options)
    if security.token_file:
        token = _read(security.token_file, "--token-file").decode().strip()
        if not token or any(c.isspace() for c in token):
            raise ValueError(f"--token-file: {security.token_file} must hold one token")
        credentials = grpc.composite_channel_credentials(
            credentials, grpc.access_token_call_credentials(token))
    return grpc.secure_channel(target, credentials, options=options)
