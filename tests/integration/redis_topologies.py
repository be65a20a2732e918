"""Real ``redis-server`` processes beyond one server, for the Sentinel, Cluster and TLS tests:
a primary with a replica and three sentinels, a three-node cluster, a TLS-only server with a
throwaway CA. Every process listens on 127.0.0.1, on ports 6400-6499 (a cluster node's bus
port is its port + 10000), in the test's own directory, and is killed by the test.
"""

from __future__ import annotations

import datetime
import ipaddress
import random
import shutil
import socket
import ssl
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

PORTS = range(6400, 6500)


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_ports(count: int, *, bus: bool = False) -> list[int]:
    """``count`` ports of 6400-6499 nobody listens on now (and their bus ports, for a
    cluster). Another session may take one meanwhile: the start then fails and says so."""
    candidates = [p for p in PORTS if _bindable(p) and (not bus or _bindable(p + 10000))]
    if len(candidates) < count:
        pytest.skip(f"fewer than {count} free ports in 6400-6499")
    return random.sample(candidates, count)


def binary(name: str = "redis-server") -> str:
    found = shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed")
    return found


@dataclass
class Process:
    """One ``redis-server`` (or sentinel) process, its port and log."""

    args: list[str]
    port: int
    log: Path
    ready: Callable[[], bool]
    process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 5.0) -> None:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.args[0]} on {self.port} exited: {self.tail()}")
            if self.ready():
                return
            time.sleep(0.02)
        raise RuntimeError(f"{self.args[0]} on {self.port} not ready: {self.tail()}")

    def kill(self) -> None:
        """SIGKILL, as a crashed or powered-off host."""
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=5)
            self.process = None

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-600:] if self.log.exists() else ""


def command(port: int, *args: str, timeout: float = 1.0, certs: Certificates | None = None) -> str:
    """One command over a plain (or, with ``certs``, TLS) socket in the inline protocol,
    its reply as text."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as raw:
        if certs is None:
            raw.sendall((" ".join(args) + "\r\n").encode())
            return _read_reply(raw)
        with _tls_context(certs).wrap_socket(raw, server_hostname="127.0.0.1") as sock:
            sock.sendall((" ".join(args) + "\r\n").encode())
            return _read_reply(sock)


def _read_reply(sock: socket.socket | ssl.SSLSocket) -> str:
    data = b""
    sock.settimeout(1.0)
    while True:
        chunk = sock.recv(65536)
        data += chunk
        if not chunk or _complete(data):
            return data.decode(errors="replace")


def _complete(data: bytes) -> bool:
    if data[:1] in (b"+", b"-", b":"):
        return data.endswith(b"\r\n")
    if data[:1] == b"$":
        head, _, rest = data.partition(b"\r\n")
        size = int(head[1:] or 0)
        return size < 0 or len(rest) >= size + 2
    return data.endswith(b"\r\n")  # an array: good enough for the replies read here


def pings(port: int) -> bool:
    try:
        return command(port, "PING", timeout=0.3).startswith("+PONG")
    except OSError:
        return False


def base_args(port: int, directory: Path) -> list[str]:
    return [
        binary(),
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        str(directory),
        # a replica syncs at once, not after the default 5 s wait for others to join
        "--repl-diskless-sync-delay",
        "0",
    ]


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 10.0) -> float:
    """Seconds until ``condition`` held; fails the test past ``timeout``."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        try:
            if condition():
                return time.monotonic() - start
        except OSError:
            pass
        time.sleep(0.05)
    pytest.fail(f"{what}: not within {timeout:g} s")


# ---- Sentinel ------------------------------------------------------------------------------


SERVICE = "mymaster"


@dataclass
class SentinelSet:
    """A primary, one replica and three sentinels (quorum 2) watching them."""

    primary: Process
    replica: Process
    sentinels: list[Process] = field(default_factory=list)
    tls: Certificates | None = None

    @property
    def addresses(self) -> list[str]:
        return [f"127.0.0.1:{s.port}" for s in self.sentinels]

    def primary_port(self) -> int:
        """The port the sentinels name as the primary now."""
        reply = command(
            self.sentinels[0].port,
            "SENTINEL",
            "get-master-addr-by-name",
            SERVICE,
            certs=self.tls,
        )
        return int(reply.split("\r\n")[-2])

    def stop(self) -> None:
        for process in [*self.sentinels, self.primary, self.replica]:
            process.kill()


def _knows_everyone(port: int, tls: Certificates | None) -> bool:
    reply = command(port, "SENTINEL", "master", SERVICE, certs=tls)
    lines = reply.split("\r\n")
    fields = dict(zip(lines[2::4], lines[4::4], strict=False))
    return fields.get("num-other-sentinels") == "2" and fields.get("num-slaves") == "1"


@contextmanager
def sentinel_set(directory: Path, *, tls: Certificates | None = None) -> Iterator[SentinelSet]:
    """Started, the replica in sync and every sentinel knowing the other two and the
    replica (hello messages go every 2 s, so this takes 1-3 s). With ``tls`` every process
    speaks TLS only, to clients and to each other."""
    primary_port, replica_port, *sentinel_ports = free_ports(5)

    def server(port: int, where: str, *extra: str) -> Process:
        (directory / where).mkdir()
        args = [*base_args(port, directory / where), *extra]
        if tls is not None:
            args = [*base_args(0, directory / where), "--tls-port", str(port), *extra]
            args += [*tls_args(tls), "--tls-replication", "yes"]
        return Process(args, port, directory / f"{where}.log", _ready(port, tls))

    primary = server(primary_port, "primary")
    replica = server(replica_port, "replica", "--replicaof", "127.0.0.1", str(primary_port))
    deployment = SentinelSet(primary, replica, tls=tls)
    try:
        primary.start()
        replica.start()
        wait_for(
            lambda: (
                "master_link_status:up" in command(replica_port, "INFO", "replication", certs=tls)
            ),
            "the replica in sync",
        )
        for port in sentinel_ports:
            conf = directory / f"sentinel-{port}.conf"
            listen = f"port {port}\n"
            if tls is not None:
                listen = f"port 0\ntls-port {port}\ntls-replication yes\n"
                listen += f"tls-cert-file {tls.server_cert}\ntls-key-file {tls.server_key}\n"
                listen += f"tls-ca-cert-file {tls.ca}\ntls-auth-clients yes\n"
            conf.write_text(
                f"{listen}bind 127.0.0.1\ndir {directory}\n"
                f"sentinel monitor {SERVICE} 127.0.0.1 {primary_port} 2\n"
                f"sentinel down-after-milliseconds {SERVICE} 400\n"
                f"sentinel failover-timeout {SERVICE} 3000\n"
                f"sentinel parallel-syncs {SERVICE} 1\n"
            )
            sentinel = Process(
                [binary(), str(conf), "--sentinel"],
                port,
                directory / f"sentinel-{port}.log",
                _ready(port, tls),
            )
            deployment.sentinels.append(sentinel)
            sentinel.start()
        for sentinel in deployment.sentinels:
            wait_for(
                lambda s=sentinel: _knows_everyone(s.port, tls),  # type: ignore[misc]
                "the sentinels acquainted",
            )
        yield deployment
    finally:
        deployment.stop()


def _ready(port: int, tls: Certificates | None) -> Callable[[], bool]:
    return (lambda: tls_pings(port, tls)) if tls is not None else (lambda: pings(port))


# ---- Cluster -------------------------------------------------------------------------------


@dataclass
class Cluster:
    nodes: list[Process]

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.nodes[0].port}/0"

    def stop(self) -> None:
        for node in self.nodes:
            node.kill()


@contextmanager
def cluster(
    directory: Path, *, extra: list[str] | None = None, tls: Certificates | None = None
) -> Iterator[Cluster]:
    """Three primaries, no replicas, every slot assigned (``redis-cli --cluster create``);
    with ``tls`` the nodes speak TLS only, ``extra`` saying how."""
    ports = free_ports(3, bus=True)

    def listen(port: int) -> list[str]:
        if tls is None:
            return base_args(port, directory)
        return [*base_args(0, directory), "--tls-port", str(port)]

    nodes = [
        Process(
            [
                *listen(port),
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                f"nodes-{port}.conf",
                "--cluster-node-timeout",
                "2000",
                *(extra or []),
            ],
            port,
            directory / f"node-{port}.log",
            _ready(port, tls),
        )
        for port in ports
    ]
    cli_tls = []
    if tls is not None:
        cli_tls = ["--tls", "--cacert", str(tls.ca), "--cert", str(tls.client_cert)]
        cli_tls += ["--key", str(tls.client_key)]
    deployment = Cluster(nodes)
    try:
        for node in nodes:
            node.start()
        created = subprocess.run(
            [
                binary("redis-cli"),
                *cli_tls,
                "--cluster",
                "create",
                *[f"127.0.0.1:{p}" for p in ports],
                "--cluster-yes",
            ],
            capture_output=True,
            timeout=15,
            check=False,
        )
        if created.returncode != 0:
            raise RuntimeError(f"cluster create failed: {created.stdout[-800:]!r}")
        for port in ports:
            wait_for(
                lambda port=port: (
                    "cluster_state:ok"  # type: ignore[misc]
                    in command(port, "CLUSTER", "INFO", certs=tls)
                ),
                "the cluster state ok",
            )
        yield deployment
    finally:
        deployment.stop()


# ---- TLS -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Certificates:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def make_certificates(directory: Path) -> Certificates:
    """A throwaway CA, a server certificate for 127.0.0.1 and localhost, and a client one."""
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    except ImportError:
        pytest.skip("the cryptography package is not installed")

    now = datetime.datetime.now(datetime.UTC)

    def name(text: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, text)])

    def write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
        path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(name("reactbot test CA"))
        .issuer_name(name("reactbot test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        # Python 3.13 verifies strictly (VERIFY_X509_STRICT): a CA has a subject key id and
        # each certificate it issues names it (the authority key id)
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )

    def issue(
        common: str, usage: tuple[x509.ObjectIdentifier, ...]
    ) -> tuple[bytes, ec.EllipticCurvePrivateKey]:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(name(common))
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
            .add_extension(x509.ExtendedKeyUsage(list(usage)), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                critical=False,
            )
            .sign(ca_key, hashes.SHA256())
        )
        return cert.public_bytes(serialization.Encoding.PEM), key

    certs = Certificates(
        ca=directory / "ca.crt",
        server_cert=directory / "server.crt",
        server_key=directory / "server.key",
        client_cert=directory / "client.crt",
        client_key=directory / "client.key",
    )
    certs.ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    server_pem, server_key = issue(  # a cluster node is a client of the others too
        "redis server", (ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH)
    )
    certs.server_cert.write_bytes(server_pem)
    write_key(server_key, certs.server_key)
    client_pem, client_key = issue("reactbot", (ExtendedKeyUsageOID.CLIENT_AUTH,))
    certs.client_cert.write_bytes(client_pem)
    write_key(client_key, certs.client_key)
    return certs


def _tls_context(certs: Certificates) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(certs.ca))
    context.load_cert_chain(str(certs.client_cert), str(certs.client_key))
    return context


def tls_pings(port: int, certs: Certificates) -> bool:
    try:
        return command(port, "PING", timeout=0.3, certs=certs).startswith("+PONG")
    except OSError:
        return False


def tls_args(certs: Certificates, *, auth_clients: bool = True) -> list[str]:
    return [
        "--tls-cert-file",
        str(certs.server_cert),
        "--tls-key-file",
        str(certs.server_key),
        "--tls-ca-cert-file",
        str(certs.ca),
        "--tls-auth-clients",
        "yes" if auth_clients else "no",
    ]


@contextmanager
def tls_server(directory: Path, certs: Certificates) -> Iterator[Process]:
    """A server that speaks TLS only (``--port 0``) and asks clients for a certificate."""
    (port,) = free_ports(1)
    args = [*base_args(0, directory), "--tls-port", str(port), *tls_args(certs)]
    server = Process(args, port, directory / "tls.log", lambda: tls_pings(port, certs))
    try:
        server.start()
        yield server
    finally:
        server.kill()
