"""The sandbox's keys and certificates: one CA for every TLS endpoint on loopback, as envtest sets up its own.

The API server serves with a certificate of this CA, and calls the Kueue and JobSet webhooks over
`https://127.0.0.1:<port>` with this CA in their `caBundle`; the service-account key pair signs tokens. Everything
is made fresh by each `sandbox up` and removed by `sandbox down`.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

LOOPBACK = "127.0.0.1"
_VALID_FOR = datetime.timedelta(days=3650)  # Kueue's rotator renews what expires within 90 days; never here


@dataclass(frozen=True)
class KeyPair:
    """PEM-encoded certificate and private key."""

    cert_pem: bytes
    key_pem: bytes

    def write(self, directory: Path, cert_name: str = "tls.crt", key_name: str = "tls.key") -> tuple[Path, Path]:
        directory.mkdir(parents=True, exist_ok=True)
        cert, key = directory / cert_name, directory / key_name
        cert.write_bytes(self.cert_pem)
        key.write_bytes(self.key_pem)
        key.chmod(0o600)
        return cert, key


def _key() -> rsa.RSAPrivateKey:
    """RSA in PKCS #1 PEM: what Kueue's certificate rotator (cert-controller) parses a seeded Secret's keys as."""
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _pem(key: rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                             serialization.NoEncryption())


def _builder(subject: str, issuer: x509.Name | None = None) -> x509.CertificateBuilder:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    now = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)
    return (x509.CertificateBuilder().subject_name(name).issuer_name(issuer or name)
            .serial_number(x509.random_serial_number()).not_valid_before(now).not_valid_after(now + _VALID_FOR))


def new_ca(name: str = "tpuplane-sandbox-ca") -> KeyPair:
    """A CA whose name is also its one DNS name: Kueue's rotator accepts a seeded CA only if it verifies for the
    name it gives its own CAs (`kueue-ca`)."""
    key = _key()
    cert = (_builder(name).public_key(key.public_key())
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False),
                           critical=True)
            .sign(key, hashes.SHA256()))
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _pem(key))


def serving_cert(ca: KeyPair, name: str, dns_names: tuple[str, ...] = ("localhost",)) -> KeyPair:
    """A server certificate for `127.0.0.1` and `dns_names`, signed by `ca`."""
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem)
    ca_key = serialization.load_pem_private_key(ca.key_pem, password=None)
    key = _key()
    names: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    names.append(x509.IPAddress(ipaddress.ip_address(LOOPBACK)))
    cert = (_builder(name, ca_cert.subject).public_key(key.public_key())
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))  # type: ignore[arg-type]
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _pem(key))


def service_account_keys() -> KeyPair:
    """The key pair that signs service-account tokens: `cert_pem` holds the public key (the API server's
    `--service-account-key-file`), `key_pem` the private one."""
    key = _key()
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo)
    return KeyPair(public, _pem(key))
