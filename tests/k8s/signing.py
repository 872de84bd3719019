# SPDX-License-Identifier: Apache-2.0
"""Signatures of gslice.io/assigned as gslice-extender writes them (src/k8s/common/sign.h),
for tests that hand-write an assignment: sign_assigned(key_file, uid, node, text), and
make_key(path) for a fresh key file. Standard library only; no environment needed."""

import hashlib
import hmac
import os

DOMAIN = b"gslice.io/assigned/v1\n"


def read_key(key_file):
    with open(key_file, "rb") as f:
        return f.read().rstrip(b"\r\n")


def key_id(key_file):
    return hashlib.sha256(read_key(key_file)).hexdigest()[:16]


def sign_assigned(key_file, uid, node, text):
    """The gslice.io/assigned-signature value for annotation text of pod uid on node."""
    key = read_key(key_file)
    msg = DOMAIN + uid.encode() + b"\n" + node.encode() + b"\n" + text.encode()
    return "v1:%s:%s" % (hashlib.sha256(key).hexdigest()[:16],
                         hmac.new(key, msg, hashlib.sha256).hexdigest())


def make_key(path):
    """A new 64-hex-digit key at path, mode 0600; returns path."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(os.urandom(32).hex() + "\n")
    return path
