"""TLS to Redis (``rediss://``): the client's SSL context from the URL's options.

The options are the ones redis-py reads from the same URL, so one URL serves the service
processes and the SDK: ``ssl_ca_certs`` (the CA file to trust; default the system's),
``ssl_certfile`` and ``ssl_keyfile`` (a client certificate, for a server that checks
clients). The server's certificate must name the URL's host: hostname checking is always
on, and so is verification (there is no option to turn either off).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from functools import cache
from urllib.parse import parse_qs

_OPTIONS = ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile")


@dataclass(frozen=True, slots=True)
class TlsOptions:
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None


def parse_options(query: str) -> TlsOptions:
    """The TLS options of a URL's query string; raises ValueError for any other option."""
    given = parse_qs(query, keep_blank_values=True, strict_parsing=bool(query))
    unknown = sorted(set(given) - set(_OPTIONS))
    if unknown:
        raise ValueError(
            f"unknown Redis URL option(s) {', '.join(unknown)}: the options are"
            f" {', '.join(_OPTIONS)}"
        )
    for name, values in given.items():
        if len(values) != 1 or not values[0]:
            raise ValueError(f"Redis URL option {name} wants one file name")
    opts = TlsOptions(*(given.get(name, [None])[0] for name in _OPTIONS))
    if (opts.cert_file is None) != (opts.key_file is None):
        raise ValueError("ssl_certfile and ssl_keyfile go together")
    return opts


@cache
def client_context(opts: TlsOptions) -> ssl.SSLContext:
    """A verifying client context (TLS 1.2+), made once per set of options."""
    try:
        context = ssl.create_default_context(cafile=opts.ca_file)
        if opts.cert_file is not None:
            context.load_cert_chain(opts.cert_file, opts.key_file)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"cannot load the Redis TLS files: {exc}") from None
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context
