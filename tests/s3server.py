#!/usr/bin/python3
# s3server.py: a tiny in-memory S3 server for the cos plugin's tests.
#
# Unlike s3rver it VERIFIES every request (AWS SigV4, the payload hash,
# Content-MD5, clock skew) and it can inject faults.  Standard library
# only; runs under Debian's /usr/bin/python3 (3.11).
#
# Usage:
#   tests/s3server.py --port-file FILE --access-key K --secret-key S
#       [--region us-east-1] [--bucket NAME]... [--seed N]
#       [--fault-503 RATE] [--fault-slowdown RATE] [--fault-500 RATE]
#       [--fault-delay RATE --delay SECS] [--fault-cut RATE]
#       [--fault-cut-after RATE] [--fault-badxml RATE] [--fault-etag RATE]
#       [--fault-ops GET,PUT,...]
#
# It listens on 127.0.0.1 only, on a port the kernel picks, and writes
# that port number to FILE (atomically, via rename) once it listens.
# Path-style addressing only: http://127.0.0.1:PORT/bucket/key.
# SIGTERM or SIGINT stops it (exit status 0).  One line per rejected
# request goes to stderr; secrets and signatures are never printed.
#
# Supported: CreateBucket, HeadBucket, DeleteBucket, PUT/GET (Range)/
# HEAD/DELETE object (with If-Match / If-None-Match), ListObjectsV2
# (prefix, start-after, continuation-token, max-keys; no delimiter).
# Anything else answers 501 NotImplemented.
#
# Verification, in this order: Authorization must be AWS4-HMAC-SHA256
# with this access key (403 InvalidAccessKeyId) and region; SignedHeaders
# must be lower case, sorted, and include host, x-amz-date and
# x-amz-content-sha256 (403 AccessDenied); the signature
# (403 SignatureDoesNotMatch; the error body holds our CanonicalRequest
# and StringToSign, as S3's does); x-amz-date within 15 minutes of now
# (403 RequestTimeTooSkewed); then, with the body read, its SHA-256
# (400 XAmzContentSHA256Mismatch; UNSIGNED-PAYLOAD is accepted but
# counted) and any Content-MD5 (400 BadDigest).  The canonical request
# uses the path exactly as received and the query decoded (%XX only: a
# literal '+' is a plus, not a space), re-encoded and sorted.  With
# "Expect: 100-continue" the headers are verified before "100 Continue".
# Note: curl 7.88's --aws-sigv4 signs the query exactly as written in
# the URL, so with curl write queries already sorted and encoded
# (upper-case %XX, "/" as %2F).
#
# Fault RATEs are probabilities 0..1, drawn from random.Random(seed);
# all faults except cut-after and etag happen before the request touches
# the store.  Only requests that pass verification are faulted.
#   503       503 ServiceUnavailable     slowdown  503 SlowDown
#   500       500 InternalError          delay     sleep SECS, then answer
#   cut       close the connection, no response
#   cut-after do the request (e.g. store the PUT), then close, no response
#   badxml    500 with a truncated-XML, garbage, or empty body (in turn)
#   etag      (PUT object only) store the object but answer a wrong ETag
#
# Control paths (no authentication, never faulted):
#   GET /__stats                 counters as JSON: requests (S3 requests
#       received), verified, rejected (+ rejected_by_code), unsigned_payload,
#       put_without_md5, faults (per kind), objects (now), by_method
#   GET /__config                the fault configuration as JSON
#   PUT /__config?fault-503=0.5&fault-ops=GET,PUT&delay=2&seed=7
#                                change it at run time; returns the new one
#   GET /__objects/BUCKET?prefix=P   [{"key": K, "size": N}, ...]

import argparse
import base64
import binascii
import datetime
import email.utils
import hashlib
import hmac
import http.server
import json
import os
import random
import re
import signal
import socket
import sys
import threading
import time
import urllib.parse
from xml.sax.saxutils import escape

FAULTS = ["503", "slowdown", "500", "delay", "cut", "cut-after", "badxml",
          "etag"]
MAX_SKEW = 15 * 60
UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                       b"0123456789-_.~")


class S3Error(Exception):
    def __init__(self, status, code, message, **extra):
        super().__init__(message)
        self.status, self.code, self.message, self.extra = \
            status, code, message, extra


# ---------------------------------------------------------------- SigV4

def uri_encode(raw: bytes) -> str:
    """SigV4 encoding: unreserved bytes stay, all else is %XX upper case."""
    return "".join(chr(b) if b in UNRESERVED else "%%%02X" % b for b in raw)


def parse_query(query: str):
    """[(name, value)] of a raw query string, as byte strings.  Only %XX
    is decoded: a literal '+' stays a '+' (it is not a space).  Like all
    of the request line, QUERY holds the raw bytes as latin-1."""
    params = []
    for part in query.split("&"):
        if part:
            name, _, value = part.partition("=")
            params.append((unquote(name), unquote(value)))
    return params


def unquote(s: str) -> bytes:
    return urllib.parse.unquote_to_bytes(s.encode("latin-1"))


def query_dict(query: str):
    """The parameters as a dict of str (the last of duplicates wins)."""
    return {n.decode("utf-8", "surrogateescape"):
            v.decode("utf-8", "surrogateescape")
            for n, v in parse_query(query)}


def canonical_query(query: str) -> str:
    """Decode each name and value as received, re-encode, then sort by
    encoded name (then value): "a=1" sorts before "a-b=2"."""
    return "&".join("%s=%s" % p for p in sorted(
        (uri_encode(n), uri_encode(v)) for n, v in parse_query(query)))


def hmac256(key: bytes, msg: str) -> bytes:
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def signature(secret, amz_date, scope, canonical):
    """The hex signature of a canonical request.  SCOPE is
    DATE/REGION/SERVICE/aws4_request."""
    string_to_sign = "\n".join([
        "AWS4-HMAC-SHA256", amz_date, scope,
        hashlib.sha256(canonical.encode("latin-1")).hexdigest()])
    key = ("AWS4" + secret).encode()
    for part in scope.split("/"):
        key = hmac256(key, part)
    return hmac.new(key, string_to_sign.encode(),
                    hashlib.sha256).hexdigest(), string_to_sign


def canonical_request(method, path, query, headers, signed, payload_hash):
    """HEADERS maps lower-case names to lists of raw values."""
    lines = "".join(
        "%s:%s\n" % (n, ",".join(" ".join(v.split()) for v in headers[n]))
        for n in signed)
    return "\n".join([method, path, canonical_query(query), lines,
                      ";".join(signed), payload_hash])


# ---------------------------------------------------------------- state

class State:
    """Object store, counters and fault configuration, under one lock."""

    def __init__(self, args):
        self.lock = threading.Lock()
        self.args = args
        self.buckets = {b: {} for b in args.bucket or []}
        self.rng = random.Random(args.seed)
        self.rates = {f: getattr(args, "fault_" + f.replace("-", "_"))
                      for f in FAULTS}
        self.delay = args.delay
        self.ops = parse_ops(args.fault_ops)
        self.badxml_turn = 0
        self.ids = 0
        self.stats = {"requests": 0, "verified": 0, "rejected": 0,
                      "rejected_by_code": {}, "unsigned_payload": 0,
                      "put_without_md5": 0,
                      "faults": {f: 0 for f in FAULTS}, "by_method": {}}

    def count(self, *path):
        """Add one to the counter stats[path[0]][path[1]]..."""
        with self.lock:
            d = self.stats
            for p in path[:-1]:
                d = d.setdefault(p, {})
            d[path[-1]] = d.get(path[-1], 0) + 1

    def request_id(self):
        with self.lock:
            self.ids += 1
            return "S3T%013X" % self.ids

    def draw_fault(self, method, put_object):
        """Draw every fault (so that each request consumes the same
        random numbers); return the first one that applies (or None),
        and for badxml which of the bad bodies to send."""
        with self.lock:
            if self.ops is not None and method not in self.ops:
                return None, 0
            hits = [f for f in FAULTS if self.rng.random() < self.rates[f]]
            for f in hits:
                if f != "etag" or put_object:
                    self.stats["faults"][f] += 1
                    if f == "badxml":
                        self.badxml_turn += 1
                    return f, self.badxml_turn - 1
            return None, 0

    def config(self):
        return {**{"fault-" + f: r for f, r in self.rates.items()},
                "delay": self.delay,
                "fault-ops": ",".join(sorted(self.ops)) if self.ops else "all"}

    def set_config(self, query):
        """Apply PUT /__config?NAME=VALUE&...: all of it, or (on a
        ValueError) none of it."""
        with self.lock:
            rates, delay, ops, seed = dict(self.rates), self.delay, \
                self.ops, None
            for name, value in query_dict(query).items():
                if name.startswith("fault-") and name[6:] in FAULTS:
                    rates[name[6:]] = rate(value)
                elif name == "delay":
                    delay = seconds(value)
                elif name == "fault-ops":
                    ops = parse_ops(value)
                elif name == "seed":
                    seed = int(value)
                else:
                    raise ValueError("unknown setting %r" % name)
            self.rates, self.delay, self.ops = rates, delay, ops
            if seed is not None:
                self.rng.seed(seed)
            return self.config()


def rate(s):
    r = float(s)
    if not 0 <= r <= 1:
        raise ValueError("fault rate %r is not within 0..1" % s)
    return r


def seconds(s):
    d = float(s)
    if not 0 <= d <= 3600:
        raise ValueError("delay %r is not within 0..3600" % s)
    return d


def parse_ops(s):
    if not s or s.lower() == "all":
        return None
    return {m.strip().upper() for m in s.split(",") if m.strip()}


def utf8(key):
    """Keys are str (undecodable bytes as surrogates); S3 orders them by
    their UTF-8 bytes."""
    return key.encode("utf-8", "surrogateescape")


def quote_etag(body):
    return '"%s"' % hashlib.md5(body).hexdigest()


# ---------------------------------------------------------------- handler

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "s3server"
    # Headers and body go out in separate writes: without TCP_NODELAY
    # every answer waits for the client's delayed ACK (40 ms).
    disable_nagle_algorithm = True
    state: State = None  # set in main()
    args = None          # the parsed command line, set in main()

    def log_message(self, *args):  # keep stderr for rejections only
        pass

    def parse_request(self):
        self.expect100 = False
        return super().parse_request()

    def handle_expect_100(self):
        # Send "100 Continue" ourselves, after the headers are verified.
        self.expect100 = True
        return True

    do_GET = do_PUT = do_HEAD = do_DELETE = do_POST = lambda self: \
        self.dispatch()

    # ---- plumbing

    def send(self, status, body=b"", headers=(), ctype=None):
        """One complete response, always with a Content-Length."""
        self.send_response(status)
        self.send_header("x-amz-request-id", self.rid)
        for name, value in headers:
            self.send_header(name, value)
        if ctype:
            self.send_header("Content-Type", ctype)
        if not any(n == "Content-Length" for n, _ in headers):
            self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_error_xml(self, e):
        """An S3Error as S3's <Error> XML (no body for HEAD)."""
        extra = "".join("<%s>%s</%s>" % (k, escape(v), k)
                        for k, v in e.extra.items())
        body = ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>%s'
                '</Code><Message>%s</Message>%s<RequestId>%s</RequestId>'
                '</Error>' % (e.code, escape(e.message), extra, self.rid))
        self.send(e.status, b"" if self.command == "HEAD" else body.encode(),
                  ctype="application/xml")

    def cut(self):
        """Drop the connection without answering."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.connection.close()

    def read_body(self):
        """The request body (Content-Length only, like S3)."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self.close_connection = True
            raise S3Error(411, "MissingContentLength",
                          "chunked transfer encoding is not supported")
        try:
            n = int(self.headers.get("Content-Length", "0"))
            if n < 0:
                raise ValueError
        except ValueError:
            self.close_connection = True
            raise S3Error(400, "InvalidArgument", "bad Content-Length")
        body = self.rfile.read(n)
        if len(body) != n:
            raise ConnectionError("client went away")
        return body

    def reject(self, e):
        """Count, log (one line) and answer a request that failed
        verification."""
        st = self.state
        st.count("rejected")
        st.count("rejected_by_code", e.code)
        detail = ""
        if "CanonicalRequest" in e.extra:
            detail = " canonical request %r" % e.extra["CanonicalRequest"]
        print("s3server: rejected %s %s %s: %d %s: %s%s" %
              (self.rid, self.command, self.path, e.status, e.code,
               e.message, detail), file=sys.stderr, flush=True)
        self.send_error_xml(e)

    # ---- the request cycle

    def dispatch(self):
        st = self.state
        self.rid = st.request_id()
        path, _, query = self.path.partition("?")
        try:
            if path.startswith("/__"):
                return self.control(path, query)
            st.count("requests")
            st.count("by_method", self.command)
            try:
                payload_hash = self.verify_headers(path, query)
            except S3Error as e:
                # Unread body: drain it unless the client is still
                # waiting for "100 Continue" (then close instead).
                if self.expect100:
                    self.close_connection = True
                else:
                    try:
                        self.read_body()
                    except S3Error:
                        self.close_connection = True
                return self.reject(e)
            if self.expect100:
                self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            try:
                body = self.read_body()
                self.verify_body(body, payload_hash)
            except S3Error as e:
                return self.reject(e)
            st.count("verified")
            self.serve(path, query, body)
        except (ConnectionError, socket.timeout):
            self.close_connection = True

    def serve(self, path, query, body):
        """Answer a verified request, perhaps with an injected fault."""
        st = self.state
        bucket, key = self.split_path(path)
        put_object = self.command == "PUT" and key != ""
        fault, turn = st.draw_fault(self.command, put_object)
        # Faults before the store is touched.
        if fault in ("503", "slowdown", "500"):
            code, msg = {"503": (503, "ServiceUnavailable"),
                         "slowdown": (503, "SlowDown"),
                         "500": (500, "InternalError")}[fault]
            return self.send_error_xml(S3Error(code, msg, "injected fault"))
        if fault == "delay":
            time.sleep(st.delay)
        if fault == "cut":
            return self.cut()
        if fault == "badxml":
            bodies = [b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Co',
                      b"\x00\xffgarbage, not XML at all }{", b""]
            return self.send(500, bodies[turn % 3],
                             ctype="application/xml")
        # The request itself, then the faults after it.
        try:
            status, rbody, headers = self.operation(bucket, key, query, body)
        except S3Error as e:
            status, rbody, headers = None, e, []
        if fault == "cut-after":
            return self.cut()
        if status is None:
            return self.send_error_xml(rbody)
        if fault == "etag":
            headers = [(n, quote_etag(body + b"wrong") if n == "ETag" else v)
                       for n, v in headers]
        self.send(status, rbody, headers)

    def split_path(self, path):
        bucket, _, key = path[1:].partition("/")
        dec = lambda s: unquote(s).decode("utf-8", "surrogateescape")
        return dec(bucket), dec(key)

    # ---- verification

    def verify_headers(self, path, query):
        """Check the Authorization header; return x-amz-content-sha256."""
        args = self.args
        auth = self.headers.get("Authorization")
        if auth is None:
            raise S3Error(403, "AccessDenied", "anonymous access refused")
        algo, _, rest = auth.strip().partition(" ")
        if algo != "AWS4-HMAC-SHA256":
            raise S3Error(400, "InvalidRequest", "use AWS4-HMAC-SHA256")
        fields = {}
        for item in rest.split(","):
            k, _, v = item.strip().partition("=")
            fields[k] = v
        try:
            cred, signed_s, sig = (fields["Credential"],
                                   fields["SignedHeaders"],
                                   fields["Signature"])
            akid, scope = cred.split("/", 1)
            date, region, service, term = scope.split("/")
        except (KeyError, ValueError):
            raise S3Error(400, "AuthorizationHeaderMalformed",
                          "malformed Authorization header")
        if akid != args.access_key:
            raise S3Error(403, "InvalidAccessKeyId",
                          "unknown access key id %r" % akid)
        if region != args.region or service != "s3" or \
           term != "aws4_request":
            raise S3Error(400, "AuthorizationHeaderMalformed",
                          "bad credential scope %r (region %s expected)"
                          % (scope, args.region))
        signed = signed_s.split(";")
        if signed != sorted(set(signed)) or signed_s != signed_s.lower():
            raise S3Error(403, "AccessDenied", "SignedHeaders must be "
                          "lower case, sorted, unique: %r" % signed_s)
        for need in ("host", "x-amz-content-sha256", "x-amz-date"):
            if need not in signed:
                raise S3Error(403, "AccessDenied",
                              "%s is not a signed header" % need)
        headers = {}
        for name, value in self.headers.items():
            headers.setdefault(name.lower(), []).append(value)
        for name in signed:
            if name not in headers:
                raise S3Error(403, "AccessDenied",
                              "signed header %s is missing" % name)
        amz_date = headers["x-amz-date"][0].strip()
        payload_hash = headers["x-amz-content-sha256"][0].strip()
        canonical = canonical_request(self.command, path, query, headers,
                                      signed, payload_hash)
        want, sts = signature(args.secret_key, amz_date, scope, canonical)
        if not hmac.compare_digest(want, sig):
            raise S3Error(403, "SignatureDoesNotMatch",
                          "the signature does not match",
                          CanonicalRequest=canonical, StringToSign=sts)
        try:
            t = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ")
            t = t.replace(tzinfo=datetime.timezone.utc).timestamp()
        except ValueError:
            raise S3Error(403, "AccessDenied", "bad x-amz-date %r" % amz_date)
        if not amz_date.startswith(date):
            raise S3Error(400, "AuthorizationHeaderMalformed",
                          "credential date differs from x-amz-date")
        if abs(t - time.time()) > MAX_SKEW:
            raise S3Error(403, "RequestTimeTooSkewed",
                          "x-amz-date %s is too far from now" % amz_date)
        return payload_hash

    def verify_body(self, body, payload_hash):
        st = self.state
        if payload_hash == "UNSIGNED-PAYLOAD":
            st.count("unsigned_payload")
        elif payload_hash != hashlib.sha256(body).hexdigest():
            raise S3Error(400, "XAmzContentSHA256Mismatch",
                          "x-amz-content-sha256 does not match the body")
        md5 = self.headers.get("Content-MD5")
        if md5 is not None:
            try:
                digest = base64.b64decode(md5.strip(), validate=True)
            except binascii.Error:
                digest = b""
            if len(digest) != 16:
                raise S3Error(400, "InvalidDigest", "bad Content-MD5")
            if digest != hashlib.md5(body).digest():
                raise S3Error(400, "BadDigest", "Content-MD5 mismatch")
        elif self.command == "PUT":
            st.count("put_without_md5")

    # ---- S3 operations: return (status, body, headers) or raise S3Error

    def operation(self, bucket, key, query, body):
        st, m = self.state, self.command
        if not bucket:
            raise S3Error(501, "NotImplemented", "ListBuckets")
        with st.lock:
            objects = st.buckets.get(bucket)
            if m == "PUT" and not key and not query:
                return self.create_bucket(bucket, objects)
            if objects is None:
                raise S3Error(404, "NoSuchBucket", "no bucket %r" % bucket)
            if not key:
                if m == "HEAD" and not query:
                    return 200, b"", []
                if m == "GET":
                    return self.list_objects(bucket, objects, query)
                if m == "DELETE" and not query:
                    if objects:
                        raise S3Error(409, "BucketNotEmpty", bucket)
                    del st.buckets[bucket]
                    return 204, b"", []
            elif not query and m in ("GET", "HEAD", "PUT", "DELETE"):
                return self.object_op(objects, key, body)
        raise S3Error(501, "NotImplemented", "%s %s not supported"
                      % (m, self.path))

    def create_bucket(self, bucket, objects):
        ok = set(bucket) <= set("abcdefghijklmnopqrstuvwxyz0123456789.-")
        if not (3 <= len(bucket) <= 63 and ok and bucket[0].isalnum()):
            raise S3Error(400, "InvalidBucketName", bucket)
        if objects is not None and self.args.region != "us-east-1":
            raise S3Error(409, "BucketAlreadyOwnedByYou", bucket)
        self.state.buckets.setdefault(bucket, {})
        return 200, b"", [("Location", "/" + bucket)]

    def object_op(self, objects, key, body):
        m, obj = self.command, objects.get(key)
        if_match = self.headers.get("If-Match")
        if_none = self.headers.get("If-None-Match")
        if m == "PUT":
            if if_none is not None and if_none.strip() == "*" and obj:
                raise S3Error(412, "PreconditionFailed", "object exists")
            if if_match is not None and (obj is None or
                                         if_match.strip() != obj[1]):
                raise S3Error(412, "PreconditionFailed", "ETag differs")
            etag = quote_etag(body)
            ctype = self.headers.get("Content-Type", "binary/octet-stream")
            objects[key] = (body, etag, time.time(), ctype)
            return 200, b"", [("ETag", etag)]
        if m == "DELETE":
            objects.pop(key, None)
            return 204, b"", []
        if obj is None:
            raise S3Error(404, "NoSuchKey", "no key %r" % key)
        data, etag, mtime, ctype = obj
        if if_match is not None and if_match.strip() != etag:
            raise S3Error(412, "PreconditionFailed", "ETag differs")
        if if_none is not None and if_none.strip() in (etag, "*"):
            return 304, b"", [("ETag", etag)]
        headers = [("ETag", etag), ("Content-Type", ctype),
                   ("Last-Modified", email.utils.formatdate(mtime,
                                                            usegmt=True)),
                   ("Accept-Ranges", "bytes")]
        status, rng = 200, self.parse_range(len(data))
        if rng is not None:
            status, (a, b) = 206, rng
            headers.append(("Content-Range", "bytes %d-%d/%d"
                            % (a, b, len(data))))
            data = data[a:b + 1]
        if m == "HEAD":
            headers.append(("Content-Length", str(len(data))))
        return status, data, headers

    def parse_range(self, size):
        """(first, last) for a satisfiable single Range, None for no or
        an unparseable Range (S3 then sends the whole object)."""
        mo = re.fullmatch(r"bytes=(\d*)-(\d*)",
                          self.headers.get("Range", "").strip())
        if not mo or mo.groups() == ("", ""):
            return None
        first, last = mo.groups()
        if first == "":                         # bytes=-N: the last N
            n = int(last)
            a, b = (max(size - n, 0) if n else size), size - 1
        else:
            a = int(first)
            b = int(last) if last else size - 1
            if last and b < a:                  # invalid: ignored
                return None
        if a >= size:
            raise S3Error(416, "InvalidRange", "range not satisfiable",
                          ActualObjectSize=str(size))
        return a, min(b, size - 1)

    def list_objects(self, bucket, objects, query):
        q = query_dict(query)
        if q.get("list-type") != "2":
            raise S3Error(501, "NotImplemented", "only ListObjectsV2")
        for p in q:
            if p not in ("list-type", "prefix", "start-after",
                         "continuation-token", "max-keys", "fetch-owner"):
                raise S3Error(501, "NotImplemented", "list parameter " + p)
        prefix = q.get("prefix", "")
        try:
            max_keys = min(int(q.get("max-keys", "1000")), 1000)
            if max_keys < 0:
                raise ValueError
        except ValueError:
            raise S3Error(400, "InvalidArgument", "bad max-keys")
        after = q.get("start-after", "")
        token = q.get("continuation-token")
        if token is not None:
            try:
                after = base64.urlsafe_b64decode(token).decode(
                    "utf-8", "surrogateescape")
            except (binascii.Error, ValueError):
                raise S3Error(400, "InvalidArgument", "bad continuation token")
        keys = sorted((k for k in objects if k.startswith(prefix)
                       and utf8(k) > utf8(after)), key=utf8)
        page = keys[:max_keys]
        truncated = len(keys) > len(page) and max_keys > 0
        x = lambda s: escape(s.encode("utf-8", "replace").decode())
        out = ['<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult '
               'xmlns="http://s3.amazonaws.com/doc/2006-03-01/">',
               "<Name>%s</Name><Prefix>%s</Prefix>" % (x(bucket), x(prefix)),
               "<KeyCount>%d</KeyCount><MaxKeys>%d</MaxKeys>"
               % (len(page), max_keys),
               "<IsTruncated>%s</IsTruncated>" % str(truncated).lower()]
        if token is not None:
            out.append("<ContinuationToken>%s</ContinuationToken>" % x(token))
        if "start-after" in q:
            out.append("<StartAfter>%s</StartAfter>" % x(q["start-after"]))
        if truncated:
            out.append("<NextContinuationToken>%s</NextContinuationToken>"
                       % base64.urlsafe_b64encode(utf8(page[-1])).decode())
        for k in page:
            data, etag, mtime, _ = objects[k]
            stamp = datetime.datetime.fromtimestamp(
                mtime, datetime.timezone.utc).strftime(
                    "%Y-%m-%dT%H:%M:%S.000Z")
            out.append("<Contents><Key>%s</Key><LastModified>%s"
                       "</LastModified><ETag>%s</ETag><Size>%d</Size>"
                       "<StorageClass>STANDARD</StorageClass></Contents>"
                       % (x(k), stamp, escape(etag, {'"': "&quot;"}),
                          len(data)))
        out.append("</ListBucketResult>")
        return 200, "".join(out).encode(), [("Content-Type",
                                             "application/xml")]

    # ---- control paths

    def control(self, path, query):
        st = self.state
        if self.expect100:
            self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        try:
            self.read_body()
        except S3Error as e:
            return self.send_error_xml(e)
        status, result = 200, None
        if path == "/__stats" and self.command == "GET":
            with st.lock:
                result = json.loads(json.dumps(st.stats))
                result["objects"] = sum(map(len, st.buckets.values()))
        elif path == "/__config" and self.command == "GET":
            with st.lock:
                result = st.config()
        elif path == "/__config" and self.command == "PUT":
            try:
                result = st.set_config(query)
            except ValueError as e:
                status, result = 400, {"error": str(e)}
        elif path.startswith("/__objects/") and self.command == "GET":
            bucket = urllib.parse.unquote(path[len("/__objects/"):])
            prefix = query_dict(query).get("prefix", "")
            with st.lock:
                objects = st.buckets.get(bucket)
                if objects is None:
                    status, result = 404, {"error": "no bucket %r" % bucket}
                else:
                    result = [{"key": k, "size": len(objects[k][0])}
                              for k in sorted(objects, key=utf8)
                              if k.startswith(prefix)]
        else:
            status, result = 404, {"error": "unknown control path"}
        self.send(status, (json.dumps(result, indent=1) + "\n").encode(),
                  ctype="application/json")


def main():
    p = argparse.ArgumentParser(description="verifying S3 test server")
    p.add_argument("--port-file", required=True)
    p.add_argument("--access-key", required=True)
    p.add_argument("--secret-key", required=True)
    p.add_argument("--region", default="us-east-1")
    p.add_argument("--bucket", action="append", help="create this bucket")
    p.add_argument("--seed", type=int, default=0)
    for f in FAULTS:
        p.add_argument("--fault-" + f, type=rate, default=0.0,
                       metavar="RATE")
    p.add_argument("--delay", type=seconds, default=1.0, metavar="SECS")
    p.add_argument("--fault-ops", default="all", metavar="GET,PUT,...")
    args = p.parse_args()

    Handler.state = State(args)
    Handler.args = args
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True

    def stop(signum, frame):
        threading.Thread(target=server.shutdown, daemon=True).start()
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    tmp = "%s.tmp.%d" % (args.port_file, os.getpid())
    with open(tmp, "w") as f:
        f.write("%d\n" % server.server_address[1])
    os.replace(tmp, args.port_file)
    server.serve_forever()
    server.server_close()


if __name__ == "__main__":
    main()
