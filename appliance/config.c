/* appliance/config.c: hhc-gateway.json(5), read with jansson and
 * validated before anything starts.  The first error found ends the
 * parse, as one line "FILE:LINE:COL: PATH: message" where PATH names
 * the value (volumes[1].backend.path) and LINE:COL (1-based, the
 * column counts bytes) is where the offending value starts; for an
 * unknown or duplicate key it is where the key starts, for a missing
 * key where the object that lacks it starts.
 *
 * Design.  jansson keeps no positions, so after it has accepted the
 * text a small scanner (scan_*) walks the text again and builds a
 * position tree: one node per JSON value, its children in document
 * order.  jansson iterates an object's members in insertion order,
 * which is document order once duplicates are refused, so the n-th
 * member jansson yields is the n-th child node: the validator walks
 * both trees together in a cursor (struct at: the value, its node and
 * its path).  A duplicate key makes jansson fail; the scanner then
 * runs again and stops at the first key it has already seen in the
 * same object, to name its path and position.
 *
 * The keys (S: string, non-empty, no control characters; N: JSON
 * integer; B: true or false; SIZE: digits with an optional K, M, G or
 * T suffix (either case, powers of 1024) or a non-negative integer).
 * Unknown keys are an error at every level.
 *
 *   key                    type      default      rule
 *   listen                 object    127.0.0.1:10809
 *     .address             S         "127.0.0.1"
 *     .port                N         10809        1..65535
 *     .socket              S         -            not with address or
 *                                                 port; < 108 bytes
 *   tls                    object    none         exactly one of:
 *     .certificates        S         -            a directory (*)
 *     .psk_file            S         -            a file (*)
 *   nbdkit                 S         "nbdkit"
 *   filter                 S         "hhc"        a name [A-Za-z0-9_-]
 *                                                 or an absolute path
 *                                                 (exists (*))
 *   plugin_dir             S         none         a directory (*)
 *   run_dir                S         "/run/hhc"
 *   metrics                object,   127.0.0.1:9810  false: none;
 *                          or B                   true: the default
 *     .address             S         "127.0.0.1"
 *     .port                N         9810         1..65535
 *   restart                object
 *     .min_ms              N         500          10..3600000
 *     .max_ms              N         30000        10..3600000, >= min_ms
 *   volumes                array     required     at least one object:
 *     .name                S         required     [A-Za-z0-9._-]{1,64},
 *                                                 unique; run_dir/NAME.sock
 *                                                 < 108 bytes
 *     .backend             object    required
 *       .type              S         required     file nbd cos iscsi
 *       file:  .path       S         required     exists, not a
 *                                                 directory (*)
 *       nbd:   .uri        S         required     nbd:// nbd+unix://
 *                                                 nbds:// nbds+unix://
 *       cos:   .endpoint   S         required     http:// or https://
 *              .bucket     S         required     no '/'
 *              .prefix     S         none         at most 1000 bytes
 *              .region     S         none
 *              .credentials S        required     a file (*)
 *              .size       SIZE      none         > 0, multiple of 512
 *              .tls_verify B         true
 *              .ca_file    S         none         a file (*)
 *       iscsi: .url        S         required     iscsi://..., no '@'
 *              .chap_file  S         none         a file (*)
 *              .initiator  S         none
 *              .sessions   N         4            1..64
 *              .timeout    N         0 (none)     0..86400 seconds
 *     .cache               S         required     exists (*), or its
 *                                                 directory does when
 *                                                 cache_size is given
 *     .cache_size          SIZE      none         >= 64K
 *     .log                 S or array none        1..8 strings; each as
 *                          of S                   cache, with log_size
 *     .log_size            SIZE      none         >= 8M
 *     .mode                S         none         pt wt wb wbflush hhc;
 *                                                 hhc needs a log, a log
 *                                                 needs hhc (the filter's
 *                                                 default: hhc with a
 *                                                 log, else wb)
 *     .backend_id          S         none
 *     .drain_on_stop       B         false
 *     .tuning              object    none         filter parameters:
 *       block-size         SIZE      (4K)         power of 2, 512..1M
 *       segment-size       SIZE      (1M)         power of 2, 64K..64M
 *       log-buffers        N or S    (4)          2..64
 *       dirty-low          N or S    (20)         0..100, <= dirty-high
 *       dirty-high         N or S    (60)         0..100, <= dirty-max
 *       dirty-max          N or S    (95)         1..100
 *       hot-ratio          N or S    (2)          1..16, "N" or "N:1"
 *       writeback-threads  N or S    (4)          1..64
 *       idle-ms            N or S    (1000)       0..3600000
 *       format             S         (auto)       auto force never
 *       direct             B or S    (false)      true/false/yes/no/on/
 *                                                 off/1/0
 *       ssd-sync           S         (flush)      flush checkpoint
 *
 * (*) only when check_paths.  A whole-number string may end in '%'
 * (as the filter allows).  No device or file may serve twice: every
 * cache, log and file backend of every volume must differ from all the
 * others (compared after realpath () where the path exists, else as
 * written).
 *
 * Nothing here is shared between threads.
 */
#include <config.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <jansson.h>

#include "common.h"
#include "gwconfig.h"

#define NO_NODE ((size_t)-1)
#define PATH_LEN 256                /* longest PATH in a message */
#define MAX_DEPTH 4096              /* nesting the scanner follows */
#define MAX_FILE (16 * 1024 * 1024) /* largest config file read */
#define SUN_PATH_MAX (sizeof ((struct sockaddr_un *)0)->sun_path - 1)

/* ------------------------------------------------------------------ */
/* The position scanner. */

/* One JSON value.  Node 0 is the root; children link first -> next. */
struct pnode {
  unsigned line, col;   /* where the value starts */
  unsigned kline, kcol; /* where its key starts (members only) */
  const char *key;      /* the key as written (members only), or NULL */
  size_t keylen;
  size_t parent, first, next, last; /* 0: none (except root's parent) */
};

HHC_VECTOR (ptree, struct pnode)

struct scan {
  const char *s;
  size_t len, pos;
  unsigned line, col;
  struct ptree *t;
  bool find_dup; /* stop at the first duplicate key */
  size_t dup;    /* that key's node, or 0 */
};

/* The byte at the scan position, or -1 at the end. */
static int
scan_peek (const struct scan *sc)
{
  return sc->pos < sc->len ? (unsigned char)sc->s[sc->pos] : -1;
}

/* Step over one byte, counting lines and columns. */
static void
scan_advance (struct scan *sc)
{
  if (sc->s[sc->pos] == '\n')
    {
      sc->line++;
      sc->col = 1;
    }
  else
    sc->col++;
  sc->pos++;
}

static void
scan_ws (struct scan *sc)
{
  int ch;

  while ((ch = scan_peek (sc)) == ' ' || ch == '\t' || ch == '\r' || ch == '\n')
    scan_advance (sc);
}

/* A new node, the last child of parent; 0 if out of memory. */
static size_t
scan_node (struct scan *sc, size_t parent)
{
  struct pnode n = { .line = sc->line, .col = sc->col, .parent = parent };
  size_t i = sc->t->len;

  if (ptree_append (sc->t, n) != 0)
    return 0;
  if (i == 0)
    return 0; /* the root is made by scan_tree */
  if (sc->t->ptr[parent].last)
    sc->t->ptr[sc->t->ptr[parent].last].next = i;
  else
    sc->t->ptr[parent].first = i;
  sc->t->ptr[parent].last = i;
  return i;
}

/* A string at the scan position: *start and *n its bytes between the
 * quotes (escapes as written).
 */
static int
scan_string (struct scan *sc, const char **start, size_t *n)
{
  int ch;

  if (scan_peek (sc) != '"')
    return -1;
  scan_advance (sc);
  *start = sc->s + sc->pos;
  while ((ch = scan_peek (sc)) != '"')
    {
      if (ch == -1)
        return -1;
      scan_advance (sc);
      if (ch == '\\')
        {
          if (scan_peek (sc) == -1)
            return -1;
          scan_advance (sc);
        }
    }
  *n = sc->s + sc->pos - *start;
  scan_advance (sc);
  return 0;
}

static int scan_value (struct scan *sc, size_t node, unsigned depth);

/* Whether member m repeats a key of an earlier member of its object. */
static bool
scan_is_dup (const struct scan *sc, size_t obj, size_t m)
{
  const struct pnode *t = sc->t->ptr;

  for (size_t c = t[obj].first; c && c != m; c = t[c].next)
    if (t[c].keylen == t[m].keylen
        && memcmp (t[c].key, t[m].key, t[m].keylen) == 0)
      return true;
  return false;
}

/* One "key": value member of object obj. */
static int
scan_member (struct scan *sc, size_t obj, unsigned depth)
{
  size_t m = scan_node (sc, obj);
  const char *key;
  size_t n;

  if (m == 0 || scan_string (sc, &key, &n) == -1)
    return -1;
  sc->t->ptr[m].kline = sc->t->ptr[m].line;
  sc->t->ptr[m].kcol = sc->t->ptr[m].col;
  sc->t->ptr[m].key = key;
  sc->t->ptr[m].keylen = n;
  if (sc->find_dup && scan_is_dup (sc, obj, m))
    {
      sc->dup = m;
      return -1;
    }
  scan_ws (sc);
  if (scan_peek (sc) != ':')
    return -1;
  scan_advance (sc);
  scan_ws (sc);
  sc->t->ptr[m].line = sc->line;
  sc->t->ptr[m].col = sc->col;
  return scan_value (sc, m, depth + 1);
}

/* An object or an array (close is '}' or ']'). */
static int
scan_container (struct scan *sc, size_t node, int close, unsigned depth)
{
  scan_advance (sc);
  scan_ws (sc);
  if (scan_peek (sc) == close)
    {
      scan_advance (sc);
      return 0;
    }
  for (;;)
    {
      if (close == '}')
        {
          if (scan_member (sc, node, depth) == -1)
            return -1;
        }
      else
        {
          size_t e = scan_node (sc, node);
          if (e == 0 || scan_value (sc, e, depth + 1) == -1)
            return -1;
        }
      scan_ws (sc);
      if (scan_peek (sc) == close)
        {
          scan_advance (sc);
          return 0;
        }
      if (scan_peek (sc) != ',')
        return -1;
      scan_advance (sc);
      scan_ws (sc);
    }
}

/* The value at the scan position, whose node (position set) is node. */
static int
scan_value (struct scan *sc, size_t node, unsigned depth)
{
  const char *s;
  size_t n = 0;
  int ch = scan_peek (sc);

  if (depth > MAX_DEPTH)
    return -1;
  if (ch == '{')
    return scan_container (sc, node, '}', depth);
  if (ch == '[')
    return scan_container (sc, node, ']', depth);
  if (ch == '"')
    return scan_string (sc, &s, &n);
  /* A number or a literal. */
  while ((ch = scan_peek (sc)) != -1
         && (isalnum (ch) || ch == '-' || ch == '+' || ch == '.'))
    {
      scan_advance (sc);
      n++;
    }
  return n ? 0 : -1;
}

/* Build t from text (which jansson has accepted, or, with find_dup,
 * refused for a duplicate key).  A failure leaves t holding the nodes
 * scanned so far.  With find_dup, the duplicate key's node or 0.
 */
static size_t
scan_tree (struct ptree *t, const char *text, size_t len, bool find_dup)
{
  struct scan sc = {
    .s = text, .len = len, .line = 1, .col = 1, .t = t, .find_dup = find_dup
  };

  scan_ws (&sc);
  scan_node (&sc, 0);
  if (t->len == 1)
    scan_value (&sc, 0, 0);
  return sc.dup;
}

/* The i-th child of node, or NO_NODE. */
static size_t
ptree_child (const struct ptree *t, size_t node, size_t i)
{
  size_t c;

  if (node >= t->len)
    return NO_NODE;
  for (c = t->ptr[node].first; c && i > 0; i--)
    c = t->ptr[c].next;
  return c ? c : NO_NODE;
}

/* The path of node as a message names it (keys as written). */
static void
ptree_path (const struct ptree *t, size_t node, char *buf, size_t size)
{
  const struct pnode *n = &t->ptr[node];
  size_t i = 0, len;

  if (node == 0)
    {
      buf[0] = '\0';
      return;
    }
  ptree_path (t, n->parent, buf, size);
  len = strlen (buf);
  if (n->key)
    snprintf (buf + len, size - len, "%s%.*s", len ? "." : "", (int)n->keylen,
              n->key);
  else
    {
      for (size_t c = t->ptr[n->parent].first; c != node; c = t->ptr[c].next)
        i++;
      snprintf (buf + len, size - len, "[%zu]", i);
    }
}

/* ------------------------------------------------------------------ */
/* Validation context, cursors and messages. */

/* A cache, log or file backend already claimed by a volume. */
struct claim {
  char *canon; /* realpath () of it, or the path as written */
  size_t vol;
  const char *role; /* "the cache", "a log", "the backend" */
};

HHC_VECTOR (claims, struct claim)

struct ctx {
  const char *file;
  char *err;
  size_t errlen;
  bool check_paths;
  struct ptree t;
  struct claims claims;
  struct gw_config *cfg; /* being filled */
};

/* A value being validated: its position node and its path. */
struct at {
  json_t *v;
  size_t node;
  char path[PATH_LEN];
};

static int fail (struct ctx *c, const struct at *a, bool at_key,
                 const char *fmt, ...) __attribute__ ((format (printf, 4, 5)));

/* Write the one error line; returns -1. */
static int
fail (struct ctx *c, const struct at *a, bool at_key, const char *fmt, ...)
{
  char msg[512];
  const char *sep = a->path[0] ? ": " : "";
  const struct pnode *n;
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (msg, sizeof msg, fmt, ap);
  va_end (ap);
  if (c->errlen == 0)
    return -1;
  if (a->node >= c->t.len)
    {
      snprintf (c->err, c->errlen, "%s: %s%s%s", c->file, a->path, sep, msg);
      return -1;
    }
  n = &c->t.ptr[a->node];
  snprintf (c->err, c->errlen, "%s:%u:%u: %s%s%s", c->file,
            at_key && n->key ? n->kline : n->line,
            at_key && n->key ? n->kcol : n->col, a->path, sep, msg);
  return -1;
}

static int
oom (struct ctx *c, const struct at *a)
{
  return fail (c, a, false, "out of memory");
}

/* Point out at value v (node) with a path made from fmt. */
static void set_at (struct at *out, json_t *v, size_t node, const char *fmt,
                    ...) __attribute__ ((format (printf, 4, 5)));

static void
set_at (struct at *out, json_t *v, size_t node, const char *fmt, ...)
{
  va_list ap;

  out->v = v;
  out->node = node;
  va_start (ap, fmt);
  vsnprintf (out->path, sizeof out->path, fmt, ap);
  va_end (ap);
}

/* The member key of object o into *out: false if there is none. */
static bool
member (const struct ctx *c, const struct at *o, const char *key,
        struct at *out)
{
  const char *k;
  json_t *v;
  size_t i = 0;

  json_object_foreach (o->v, k, v)
  {
    if (strcmp (k, key) == 0)
      {
        set_at (out, v, ptree_child (&c->t, o->node, i), "%s%s%s", o->path,
                o->path[0] ? "." : "", key);
        return true;
      }
    i++;
  }
  return false;
}

/* Element i of array a into *out. */
static void
element (const struct ctx *c, const struct at *a, size_t i, struct at *out)
{
  set_at (out, json_array_get (a->v, i), ptree_child (&c->t, a->node, i),
          "%s[%zu]", a->path, i);
}

static int
missing (struct ctx *c, const struct at *o, const char *key)
{
  struct at a;

  set_at (&a, NULL, o->node, "%s%s%s", o->path, o->path[0] ? "." : "", key);
  return fail (c, &a, false, "required key missing");
}

static bool
in_list (const char *s, const char *const *list)
{
  for (; *list; list++)
    if (strcmp (s, *list) == 0)
      return true;
  return false;
}

/* Every key of object o is in allowed (NULL-terminated). */
static int
check_keys (struct ctx *c, const struct at *o, const char *const *allowed)
{
  const char *k;
  json_t *v;
  size_t i = 0;
  struct at a;

  json_object_foreach (o->v, k, v)
  {
    if (!in_list (k, allowed))
      {
        set_at (&a, v, ptree_child (&c->t, o->node, i), "%s%s%s", o->path,
                o->path[0] ? "." : "", k);
        return fail (c, &a, true, "unknown key");
      }
    i++;
  }
  return 0;
}

/* ------------------------------------------------------------------ */
/* Typed members: 1 if there, 0 if absent (and not required), -1 on an
 * error (reported).  *a, if not NULL, is left at the value.
 */

/* A copy of s into *dst (which must be NULL). */
static int
copy (struct ctx *c, const struct at *a, const char *s, char **dst)
{
  *dst = strdup (s);
  return *dst ? 0 : oom (c, a);
}

/* String value a: non-empty, no control characters. */
static int
check_string (struct ctx *c, const struct at *a)
{
  const char *s;

  if (!json_is_string (a->v))
    return fail (c, a, false, "must be a string");
  s = json_string_value (a->v);
  if (*s == '\0')
    return fail (c, a, false, "must not be empty");
  for (; *s; s++)
    if ((unsigned char)*s < 0x20 || *s == 0x7f)
      return fail (c, a, false, "must not contain control characters");
  return 0;
}

static int
get_string (struct ctx *c, const struct at *o, const char *key, bool required,
            char **dst, struct at *a)
{
  struct at tmp;

  if (a == NULL)
    a = &tmp;
  if (!member (c, o, key, a))
    return required ? missing (c, o, key) : 0;
  if (check_string (c, a) == -1
      || copy (c, a, json_string_value (a->v), dst) == -1)
    return -1;
  return 1;
}

static int
get_uint (struct ctx *c, const struct at *o, const char *key, unsigned lo,
          unsigned hi, unsigned *dst, struct at *a)
{
  struct at tmp;
  json_int_t n;

  if (a == NULL)
    a = &tmp;
  if (!member (c, o, key, a))
    return 0;
  n = json_is_integer (a->v) ? json_integer_value (a->v) : -1;
  if (n < lo || n > hi)
    return fail (c, a, false, "must be an integer from %u to %u", lo, hi);
  *dst = n;
  return 1;
}

static int
get_bool (struct ctx *c, const struct at *o, const char *key, bool *dst)
{
  struct at a;

  if (!member (c, o, key, &a))
    return 0;
  if (!json_is_boolean (a.v))
    return fail (c, &a, false, "must be true or false");
  *dst = json_is_true (a.v);
  return 1;
}

static int
get_object (struct ctx *c, const struct at *o, const char *key, bool required,
            struct at *a)
{
  if (!member (c, o, key, a))
    return required ? missing (c, o, key) : 0;
  if (!json_is_object (a->v))
    return fail (c, a, false, "must be an object");
  return 1;
}

/* "10G" into *out: digits, an optional K M G T (powers of 1024). */
static bool
parse_size (const char *s, uint64_t *out)
{
  static const char suffixes[] = "kmgt";
  const char *p;
  uint64_t v = 0;

  if (!isdigit ((unsigned char)*s))
    return false;
  for (; isdigit ((unsigned char)*s); s++)
    {
      if (v > (INT64_MAX - 9) / 10)
        return false;
      v = v * 10 + (*s - '0');
    }
  if (*s)
    {
      p = strchr (suffixes, tolower ((unsigned char)*s));
      if (p == NULL || s[1])
        return false;
      for (int i = 0; i <= p - suffixes; i++)
        {
          if (v > INT64_MAX / 1024)
            return false;
          v *= 1024;
        }
    }
  *out = v;
  return true;
}

/* Value a as a size (a size string or an integer) into *bytes and, as
 * text, into *text (if not NULL).
 */
static int
size_value (struct ctx *c, const struct at *a, uint64_t *bytes, char **text)
{
  char buf[32];

  if (json_is_integer (a->v) && json_integer_value (a->v) >= 0)
    {
      snprintf (buf, sizeof buf, "%" JSON_INTEGER_FORMAT,
                json_integer_value (a->v));
      *bytes = json_integer_value (a->v);
    }
  else if (!json_is_string (a->v)
           || !parse_size (json_string_value (a->v), bytes))
    return fail (c, a, false,
                 "must be a size: digits with an optional K, M, G or T");
  return text ? copy (
             c, a, json_is_string (a->v) ? json_string_value (a->v) : buf, text)
              : 0;
}

/* A size member of at least min (min_text in messages). */
static int
get_size (struct ctx *c, const struct at *o, const char *key, uint64_t min,
          const char *min_text, char **dst, struct at *a)
{
  uint64_t n;

  if (!member (c, o, key, a))
    return 0;
  if (size_value (c, a, &n, dst) == -1)
    return -1;
  if (n < min)
    return fail (c, a, false, "must be at least %s", min_text);
  return 1;
}

/* ------------------------------------------------------------------ */
/* Devices and files. */

/* With check_paths: path (the value of a) exists, and is a directory
 * or is not one, as dir says.
 */
static int
must_exist (struct ctx *c, const struct at *a, const char *path, bool dir)
{
  struct stat st;

  if (!c->check_paths)
    return 0;
  if (stat (path, &st) == -1)
    return fail (c, a, false, "\"%s\": %s", path, strerror (errno));
  if (dir && !S_ISDIR (st.st_mode))
    return fail (c, a, false, "\"%s\": %s", path, strerror (ENOTDIR));
  if (!dir && S_ISDIR (st.st_mode))
    return fail (c, a, false, "\"%s\": %s", path, strerror (EISDIR));
  return 0;
}

/* With check_paths: path exists (not as a directory) or, if it may be
 * created, at least its directory does.
 */
static int
may_create (struct ctx *c, const struct at *a, const char *path, bool create)
{
  HHC_CLEANUP_FREE char *dir = NULL;
  struct stat st;
  char *slash;

  if (!c->check_paths || !create || stat (path, &st) == 0 || errno != ENOENT)
    return must_exist (c, a, path, false);
  if (copy (c, a, path, &dir) == -1)
    return -1;
  slash = strrchr (dir, '/');
  if (slash == NULL)
    strcpy (dir, ".");
  else
    slash[slash == dir] = '\0';
  if (stat (dir, &st) == -1)
    return fail (c, a, false, "\"%s\": directory \"%s\": %s", path, dir,
                 strerror (errno));
  if (!S_ISDIR (st.st_mode))
    return fail (c, a, false, "\"%s\": directory \"%s\": %s", path, dir,
                 strerror (ENOTDIR));
  return 0;
}

/* Volume vol uses path (the value of a) as role: no other cache, log
 * or file backend may be the same file.
 */
static int
claim (struct ctx *c, const struct at *a, const char *path, size_t vol,
       const char *role)
{
  struct claim cl
      = { .canon = realpath (path, NULL), .vol = vol, .role = role };

  if (cl.canon == NULL && copy (c, a, path, &cl.canon) == -1)
    return -1;
  for (size_t i = 0; i < c->claims.len; i++)
    if (strcmp (c->claims.ptr[i].canon, cl.canon) == 0)
      {
        free (cl.canon);
        return fail (c, a, false, "\"%s\" is also %s of volume \"%s\"", path,
                     c->claims.ptr[i].role,
                     c->cfg->volumes[c->claims.ptr[i].vol].name);
      }
  if (claims_append (&c->claims, cl) != 0)
    {
      free (cl.canon);
      return oom (c, a);
    }
  return 0;
}

/* ------------------------------------------------------------------ */
/* The gateway's own keys. */

/* "listen": {"socket"}, with a (the socket's value) in o. */
static int
listen_socket (struct ctx *c, const struct at *o, const struct at *a,
               struct gw_config *cfg)
{
  struct at b;

  if (member (c, o, "address", &b) || member (c, o, "port", &b))
    return fail (c, &b, true, "not with listen.socket");
  if (strlen (cfg->listen_socket) > SUN_PATH_MAX)
    return fail (c, a, false, "longer than %zu bytes", SUN_PATH_MAX);
  cfg->listen_port = 0;
  return 0;
}

/* "listen": {"address", "port"} or {"socket"}. */
static int
parse_listen (struct ctx *c, const struct at *root, struct gw_config *cfg)
{
  static const char *const keys[] = { "address", "port", "socket", NULL };
  struct at o, a;
  int r = get_object (c, root, "listen", false, &o);

  cfg->listen_port = 10809;
  if (r == -1)
    return -1;
  if (r == 1)
    {
      if (check_keys (c, &o, keys) == -1)
        return -1;
      r = get_string (c, &o, "socket", false, &cfg->listen_socket, &a);
      if (r == -1)
        return -1;
      if (r == 1)
        return listen_socket (c, &o, &a, cfg);
      if (get_string (c, &o, "address", false, &cfg->listen_address, NULL) == -1
          || get_uint (c, &o, "port", 1, 65535, &cfg->listen_port, NULL) == -1)
        return -1;
    }
  if (cfg->listen_address == NULL)
    return copy (c, root, "127.0.0.1", &cfg->listen_address);
  return 0;
}

/* "tls": {"certificates"} or {"psk_file"}. */
static int
parse_tls (struct ctx *c, const struct at *root, struct gw_config *cfg)
{
  static const char *const keys[] = { "certificates", "psk_file", NULL };
  struct at o, a, b;
  int r = get_object (c, root, "tls", false, &o);
  int rc, rp;

  if (r <= 0)
    return r;
  if (check_keys (c, &o, keys) == -1)
    return -1;
  rc = get_string (c, &o, "certificates", false, &cfg->tls_certificates, &a);
  if (rc == -1)
    return -1;
  rp = get_string (c, &o, "psk_file", false, &cfg->tls_psk_file, &b);
  if (rp == -1)
    return -1;
  if (rc == 1 && rp == 1)
    return fail (c, &b, true, "not with tls.certificates");
  if (rc == 0 && rp == 0)
    return fail (c, &o, false, "needs certificates or psk_file");
  if (rc == 1)
    return must_exist (c, &a, cfg->tls_certificates, true);
  return must_exist (c, &b, cfg->tls_psk_file, false);
}

/* s is a name of [A-Za-z0-9] and the characters of extra, 1..max. */
static bool
is_name (const char *s, const char *extra, size_t max)
{
  size_t n = strlen (s);

  if (n == 0 || n > max)
    return false;
  for (; *s; s++)
    if (!isalnum ((unsigned char)*s) && strchr (extra, *s) == NULL)
      return false;
  return true;
}

/* "nbdkit", "filter", "plugin_dir", "run_dir". */
static int
parse_programs (struct ctx *c, const struct at *root, struct gw_config *cfg)
{
  struct at a;
  int r;

  if (get_string (c, root, "nbdkit", false, &cfg->nbdkit, NULL) == -1)
    return -1;
  r = get_string (c, root, "filter", false, &cfg->filter, &a);
  if (r == -1)
    return -1;
  if (r == 1 && cfg->filter[0] == '/'
      && must_exist (c, &a, cfg->filter, false) == -1)
    return -1;
  if (r == 1 && cfg->filter[0] != '/' && !is_name (cfg->filter, "_-", 64))
    return fail (c, &a, false, "must be a filter name or an absolute path");
  r = get_string (c, root, "plugin_dir", false, &cfg->plugin_dir, &a);
  if (r == -1 || (r == 1 && must_exist (c, &a, cfg->plugin_dir, true) == -1))
    return -1;
  if (get_string (c, root, "run_dir", false, &cfg->run_dir, NULL) == -1)
    return -1;
  if ((cfg->nbdkit == NULL && copy (c, root, "nbdkit", &cfg->nbdkit) == -1)
      || (cfg->filter == NULL && copy (c, root, "hhc", &cfg->filter) == -1)
      || (cfg->run_dir == NULL
          && copy (c, root, "/run/hhc", &cfg->run_dir) == -1))
    return -1;
  return 0;
}

/* "metrics": {"address", "port"}, true or false. */
static int
parse_metrics (struct ctx *c, const struct at *root, struct gw_config *cfg)
{
  static const char *const keys[] = { "address", "port", NULL };
  struct at o;

  cfg->metrics = true;
  cfg->metrics_port = 9810;
  if (member (c, root, "metrics", &o))
    {
      if (json_is_false (o.v))
        {
          cfg->metrics = false;
          cfg->metrics_port = 0;
          return 0;
        }
      if (json_is_object (o.v)
          && (check_keys (c, &o, keys) == -1
              || get_string (c, &o, "address", false, &cfg->metrics_address,
                             NULL)
                     == -1
              || get_uint (c, &o, "port", 1, 65535, &cfg->metrics_port, NULL)
                     == -1))
        return -1;
      if (!json_is_object (o.v) && !json_is_true (o.v))
        return fail (c, &o, false, "must be an object or false");
    }
  if (cfg->metrics_address == NULL)
    return copy (c, root, "127.0.0.1", &cfg->metrics_address);
  return 0;
}

/* "restart": {"min_ms", "max_ms"}. */
static int
parse_restart (struct ctx *c, const struct at *root, struct gw_config *cfg)
{
  static const char *const keys[] = { "min_ms", "max_ms", NULL };
  struct at o, amin, amax;
  int r, rmin, rmax;

  cfg->restart_min_ms = 500;
  cfg->restart_max_ms = 30000;
  r = get_object (c, root, "restart", false, &o);
  if (r <= 0)
    return r;
  if (check_keys (c, &o, keys) == -1)
    return -1;
  rmin = get_uint (c, &o, "min_ms", 10, 3600000, &cfg->restart_min_ms, &amin);
  if (rmin == -1)
    return -1;
  rmax = get_uint (c, &o, "max_ms", 10, 3600000, &cfg->restart_max_ms, &amax);
  if (rmax == -1)
    return -1;
  if (cfg->restart_max_ms >= cfg->restart_min_ms)
    return 0;
  if (rmax == 1)
    return fail (c, &amax, false, "must be at least min_ms (%u)",
                 cfg->restart_min_ms);
  return fail (c, &amin, false, "must not exceed max_ms (%u)",
               cfg->restart_max_ms);
}

/* ------------------------------------------------------------------ */
/* A volume's backend. */

static int
parse_file_backend (struct ctx *c, const struct at *b, size_t i,
                    struct gw_volume *v)
{
  struct at a;

  if (get_string (c, b, "path", true, &v->path, &a) == -1
      || must_exist (c, &a, v->path, false) == -1)
    return -1;
  return claim (c, &a, v->path, i, "the backend");
}

/* s starts with one of prefixes (NULL-terminated). */
static bool
has_prefix (const char *s, const char *const *prefixes)
{
  for (; *prefixes; prefixes++)
    if (strncasecmp (s, *prefixes, strlen (*prefixes)) == 0)
      return true;
  return false;
}

static int
parse_nbd_backend (struct ctx *c, const struct at *b, struct gw_volume *v)
{
  static const char *const schemes[]
      = { "nbd://", "nbd+unix://", "nbds://", "nbds+unix://", NULL };
  struct at a;

  if (get_string (c, b, "uri", true, &v->uri, &a) == -1)
    return -1;
  if (!has_prefix (v->uri, schemes))
    return fail (c, &a, false,
                 "must start with nbd://, nbd+unix://, nbds:// or "
                 "nbds+unix://");
  return 0;
}

/* The cos backend's optional keys. */
static int
parse_cos_options (struct ctx *c, const struct at *b, struct gw_volume *v)
{
  struct at a;
  uint64_t n;
  int r;

  r = get_string (c, b, "prefix", false, &v->prefix, &a);
  if (r == 1 && strlen (v->prefix) > 1000)
    return fail (c, &a, false, "longer than 1000 bytes");
  if (r == -1 || get_string (c, b, "region", false, &v->region, NULL) == -1)
    return -1;
  if (member (c, b, "size", &a))
    {
      if (size_value (c, &a, &n, &v->size) == -1)
        return -1;
      if (n == 0 || n % 512)
        return fail (c, &a, false, "must be a positive multiple of 512");
    }
  v->tls_verify = true;
  if (get_bool (c, b, "tls_verify", &v->tls_verify) == -1)
    return -1;
  r = get_string (c, b, "ca_file", false, &v->ca_file, &a);
  if (r == -1 || (r == 1 && must_exist (c, &a, v->ca_file, false) == -1))
    return -1;
  return 0;
}

static int
parse_cos_backend (struct ctx *c, const struct at *b, struct gw_volume *v)
{
  static const char *const schemes[] = { "http://", "https://", NULL };
  struct at a;

  if (get_string (c, b, "endpoint", true, &v->endpoint, &a) == -1)
    return -1;
  if (!has_prefix (v->endpoint, schemes))
    return fail (c, &a, false, "must start with http:// or https://");
  if (get_string (c, b, "bucket", true, &v->bucket, &a) == -1)
    return -1;
  if (strchr (v->bucket, '/'))
    return fail (c, &a, false, "not a bucket name (it holds a '/')");
  if (get_string (c, b, "credentials", true, &v->credentials, &a) == -1
      || must_exist (c, &a, v->credentials, false) == -1)
    return -1;
  return parse_cos_options (c, b, v);
}

static int
parse_iscsi_backend (struct ctx *c, const struct at *b, struct gw_volume *v)
{
  static const char *const schemes[] = { "iscsi://", NULL };
  struct at a;
  int r;

  if (get_string (c, b, "url", true, &v->url, &a) == -1)
    return -1;
  if (!has_prefix (v->url, schemes))
    return fail (c, &a, false, "must start with iscsi://");
  if (strchr (v->url, '@'))
    return fail (c, &a, false,
                 "must not hold a user or password (put them in chap_file)");
  r = get_string (c, b, "chap_file", false, &v->chap_file, &a);
  if (r == -1 || (r == 1 && must_exist (c, &a, v->chap_file, false) == -1))
    return -1;
  if (get_string (c, b, "initiator", false, &v->initiator, NULL) == -1
      || get_uint (c, b, "sessions", 1, 64, &v->sessions, NULL) == -1)
    return -1;
  unsigned t;
  r = get_uint (c, b, "timeout", 0, 86400, &t, NULL);
  if (r == -1)
    return -1;
  v->timeout = r == 1 ? (int)t : -1;
  return 0;
}

static const char *const backend_types[]
    = { "file", "nbd", "cos", "iscsi", NULL };

/* "backend": {"type": ..., the type's keys}. */
static int
parse_backend (struct ctx *c, const struct at *vo, size_t i,
               struct gw_volume *v)
{
  static const char *const file_keys[] = { "type", "path", NULL };
  static const char *const nbd_keys[] = { "type", "uri", NULL };
  static const char *const cos_keys[]
      = { "type",        "endpoint", "bucket",     "prefix",  "region",
          "credentials", "size",     "tls_verify", "ca_file", NULL };
  static const char *const iscsi_keys[] = {
    "type", "url", "chap_file", "initiator", "sessions", "timeout", NULL
  };
  static const char *const *const keys[]
      = { file_keys, nbd_keys, cos_keys, iscsi_keys };
  HHC_CLEANUP_FREE char *type = NULL;
  struct at b, a;
  unsigned t;

  if (get_object (c, vo, "backend", true, &b) == -1
      || get_string (c, &b, "type", true, &type, &a) == -1)
    return -1;
  for (t = 0; backend_types[t]; t++)
    if (strcmp (type, backend_types[t]) == 0)
      break;
  if (backend_types[t] == NULL)
    return fail (c, &a, false, "must be file, nbd, cos or iscsi");
  v->type = t;
  if (check_keys (c, &b, keys[t]) == -1)
    return -1;
  switch (v->type)
    {
    case GW_BACKEND_FILE:
      return parse_file_backend (c, &b, i, v);
    case GW_BACKEND_NBD:
      return parse_nbd_backend (c, &b, v);
    case GW_BACKEND_COS:
      return parse_cos_backend (c, &b, v);
    case GW_BACKEND_ISCSI:
      return parse_iscsi_backend (c, &b, v);
    }
  return -1;
}

/* ------------------------------------------------------------------ */
/* A volume's cache, logs, mode and tuning. */

/* "name": valid, unique, and its sockets fit in a sockaddr_un. */
static int
parse_name (struct ctx *c, const struct at *vo, size_t i, struct gw_volume *v)
{
  struct at a;

  if (get_string (c, vo, "name", true, &v->name, &a) == -1)
    return -1;
  if (!is_name (v->name, "._-", 64))
    return fail (c, &a, false, "must be 1 to 64 of A-Z a-z 0-9 . _ -");
  for (size_t j = 0; j < i; j++)
    if (strcmp (c->cfg->volumes[j].name, v->name) == 0)
      return fail (c, &a, false, "\"%s\" is also the name of volumes[%zu]",
                   v->name, j);
  if (strlen (c->cfg->run_dir) + strlen (v->name) + strlen ("/.sock")
      > SUN_PATH_MAX)
    return fail (c, &a, false,
                 "the socket %s/%s.sock would be longer than "
                 "%zu bytes",
                 c->cfg->run_dir, v->name, SUN_PATH_MAX);
  return 0;
}

/* "cache" and "cache_size". */
static int
parse_cache (struct ctx *c, const struct at *vo, size_t i, struct gw_volume *v)
{
  struct at a, s;
  int r;

  if (get_string (c, vo, "cache", true, &v->cache, &a) == -1)
    return -1;
  r = get_size (c, vo, "cache_size", 65536, "64K", &v->cache_size, &s);
  if (r == -1 || may_create (c, &a, v->cache, r == 1) == -1)
    return -1;
  return claim (c, &a, v->cache, i, "the cache");
}

/* One log path, value a. */
static int
add_log (struct ctx *c, const struct at *a, size_t i, struct gw_volume *v)
{
  char *path = NULL;

  if (check_string (c, a) == -1
      || copy (c, a, json_string_value (a->v), &path) == -1)
    return -1;
  v->logs[v->nlogs++] = path;
  if (may_create (c, a, path, v->log_size != NULL) == -1)
    return -1;
  return claim (c, a, path, i, "a log");
}

/* "log" (a string or an array of them) and "log_size". */
static int
parse_logs (struct ctx *c, const struct at *vo, size_t i, struct gw_volume *v)
{
  struct at a, e;
  size_t n;

  if (get_size (c, vo, "log_size", 8 << 20, "8M", &v->log_size, &a) == -1)
    return -1;
  if (!member (c, vo, "log", &a))
    return 0;
  if (json_is_string (a.v))
    return add_log (c, &a, i, v);
  if (!json_is_array (a.v))
    return fail (c, &a, false, "must be a string or an array of strings");
  n = json_array_size (a.v);
  if (n < 1 || n > GW_MAX_LOGS)
    return fail (c, &a, false, "must hold 1 to %d paths", GW_MAX_LOGS);
  for (size_t j = 0; j < n; j++)
    {
      element (c, &a, j, &e);
      if (add_log (c, &e, i, v) == -1)
        return -1;
    }
  return 0;
}

/* "mode", which must agree with the logs, as the filter wants. */
static int
parse_mode (struct ctx *c, const struct at *vo, struct gw_volume *v)
{
  static const char *const modes[]
      = { "pt", "wt", "wb", "wbflush", "hhc", NULL };
  struct at a;
  int r = get_string (c, vo, "mode", false, &v->mode, &a);

  if (r <= 0)
    return r;
  if (!in_list (v->mode, modes))
    return fail (c, &a, false, "must be pt, wt, wb, wbflush or hhc");
  if (strcmp (v->mode, "hhc") == 0 && v->nlogs == 0)
    return fail (c, &a, false, "mode hhc needs a log");
  /* Outside hhc a log is only retired (voided once the cache's dirty
   * blocks are written back): nbdkit-hhc-filter(1), "Using a cache
   * without its log".  Nothing is to be created for that.
   */
  if (strcmp (v->mode, "hhc") != 0 && v->nlogs > 0 && v->log_size)
    return fail (c, &a, false,
                 "mode %s only retires the log its cache was used with in "
                 "mode hhc, which must exist: remove log_size",
                 v->mode);
  return 0;
}

/* The filter's tuning parameters (nbdkit-hhc-filter/hhc.c .config). */
enum tuning_kind { T_SIZE, T_UINT, T_RATIO, T_FORMAT, T_BOOL, T_SSDSYNC };

struct tuning_key {
  const char *key;
  enum tuning_kind kind;
  unsigned lo, hi;   /* T_SIZE (a power of two), T_UINT, T_RATIO */
  const char *range; /* in messages */
};

static const struct tuning_key tuning_keys[] = {
  { "block-size", T_SIZE, 512, 1 << 20, "a power of two from 512 to 1M" },
  { "segment-size", T_SIZE, 64 << 10, 64 << 20,
    "a power of two from 64K to 64M" },
  { "log-buffers", T_UINT, 2, 64, "a whole number from 2 to 64" },
  { "dirty-low", T_UINT, 0, 100, "a whole number from 0 to 100" },
  { "dirty-high", T_UINT, 0, 100, "a whole number from 0 to 100" },
  { "dirty-max", T_UINT, 1, 100, "a whole number from 1 to 100" },
  { "hot-ratio", T_RATIO, 1, 16, "N or N:1, N from 1 to 16" },
  { "writeback-threads", T_UINT, 1, 64, "a whole number from 1 to 64" },
  { "idle-ms", T_UINT, 0, 3600000, "a whole number from 0 to 3600000" },
  { "format", T_FORMAT, 0, 0, "auto, force or never" },
  { "direct", T_BOOL, 0, 0, "true or false" },
  { "ssd-sync", T_SSDSYNC, 0, 0, "flush or checkpoint" },
};
#define NTUNING (sizeof tuning_keys / sizeof tuning_keys[0])

/* The filter's defaults of dirty-low, dirty-high, dirty-max. */
static const unsigned dirty_defaults[3] = { 20, 60, 95 };

/* A whole number string ("60" or "60%"). */
static bool
parse_uint (const char *s, uint64_t *out)
{
  uint64_t v = 0;

  if (!isdigit ((unsigned char)*s))
    return false;
  for (; isdigit ((unsigned char)*s); s++)
    {
      if (v > 100000000)
        return false;
      v = v * 10 + (*s - '0');
    }
  *out = v;
  return *s == '\0' || strcmp (s, "%") == 0;
}

/* Whether text is a valid value of k (n: its number, if it has one). */
static bool
tuning_ok (const struct tuning_key *k, const char *text, uint64_t *n)
{
  static const char *const formats[] = { "auto", "force", "never", NULL };
  static const char *const ssd_syncs[] = { "flush", "checkpoint", NULL };
  static const char *const bools[]
      = { "1", "0", "true", "false", "yes", "no", "on", "off", NULL };
  char buf[32];
  size_t len = strlen (text);

  switch (k->kind)
    {
    case T_SIZE:
      return parse_size (text, n) && *n >= k->lo && *n <= k->hi
             && HHC_IS_POW2 (*n);
    case T_RATIO:
      if (len >= 2 && len < sizeof buf && strcmp (text + len - 2, ":1") == 0)
        {
          memcpy (buf, text, len - 2);
          buf[len - 2] = '\0';
          text = buf;
        }
      /* fallthrough */
    case T_UINT:
      return parse_uint (text, n) && *n >= k->lo && *n <= k->hi;
    case T_FORMAT:
      return in_list (text, formats);
    case T_SSDSYNC:
      return in_list (text, ssd_syncs);
    case T_BOOL:
      for (int i = 0; bools[i]; i++)
        if (strcasecmp (text, bools[i]) == 0)
          return true;
      return false;
    }
  return false;
}

/* Tuning value a of key k, as text into *dst. */
static int
tuning_value (struct ctx *c, const struct at *a, const struct tuning_key *k,
              uint64_t *n, char **dst)
{
  char buf[32];
  const char *text = buf;

  if (json_is_string (a->v))
    text = json_string_value (a->v);
  else if (json_is_integer (a->v) && k->kind != T_FORMAT && k->kind != T_BOOL
           && k->kind != T_SSDSYNC)
    snprintf (buf, sizeof buf, "%" JSON_INTEGER_FORMAT,
              json_integer_value (a->v));
  else if (json_is_boolean (a->v) && k->kind == T_BOOL)
    text = json_is_true (a->v) ? "true" : "false";
  else
    text = NULL;
  if (text == NULL || !tuning_ok (k, text, n))
    return fail (c, a, false, "must be %s", k->range);
  return copy (c, a, text, dst);
}

/* dirty-low <= dirty-high <= dirty-max, given or default (at[] the
 * values given, node NO_NODE if not).
 */
static int
check_dirty (struct ctx *c, const struct at at[3], const unsigned val[3])
{
  static const char *const names[] = { "dirty-low", "dirty-high", "dirty-max" };

  for (int j = 0; j < 2; j++)
    {
      if (val[j] <= val[j + 1])
        continue;
      if (at[j].v)
        return fail (c, &at[j], false, "must not exceed %s (%u)", names[j + 1],
                     val[j + 1]);
      return fail (c, &at[j + 1], false, "must be at least %s (%u)", names[j],
                   val[j]);
    }
  return 0;
}

/* "tuning": {"block-size": "4K", ...}. */
static int
parse_tuning (struct ctx *c, const struct at *vo, struct gw_volume *v)
{
  struct at o, a, dirty[3] = { { 0 } };
  unsigned dval[3]
      = { dirty_defaults[0], dirty_defaults[1], dirty_defaults[2] };
  const char *key;
  json_t *val;
  size_t i = 0, k;
  uint64_t n = 0;
  int r = get_object (c, vo, "tuning", false, &o);

  if (r <= 0)
    return r;
  json_object_foreach (o.v, key, val)
  {
    set_at (&a, val, ptree_child (&c->t, o.node, i++), "%s.%s", o.path, key);
    for (k = 0; k < NTUNING && strcmp (key, tuning_keys[k].key); k++)
      ;
    if (k == NTUNING)
      return fail (c, &a, true, "unknown key (not a tuning parameter)");
    if (v->ntuning == GW_MAX_TUNING)
      return fail (c, &a, true, "more than %d tuning keys", GW_MAX_TUNING);
    v->tuning[v->ntuning].key = strdup (key);
    if (v->tuning[v->ntuning].key == NULL)
      return oom (c, &a);
    if (tuning_value (c, &a, &tuning_keys[k], &n,
                      &v->tuning[v->ntuning++].value)
        == -1)
      return -1;
    if (strncmp (key, "dirty-", 6) == 0)
      {
        int d = k - 3; /* dirty-low is tuning_keys[3] */
        dirty[d] = a;
        dval[d] = n;
      }
  }
  return check_dirty (c, dirty, dval);
}

/* With check_paths: a file backend has no export description, so the
 * filter formats no cache for it without backend_id (a volume of the
 * same size could be given its cache); a cache that exists already
 * (formatted without one by an earlier version) still loads.
 */
static int
check_new_cache_id (struct ctx *c, const struct at *vo,
                    const struct gw_volume *v)
{
  struct stat st;

  if (!c->check_paths || v->type != GW_BACKEND_FILE || v->backend_id
      || stat (v->cache, &st) == 0)
    return 0;
  return fail (c, vo, false,
               "a file backend needs \"backend_id\" (a name unique to it) "
               "before its cache \"%s\" is made",
               v->cache);
}

static int
parse_volume (struct ctx *c, const struct at *vo, size_t i)
{
  static const char *const keys[]
      = { "name",          "backend",  "cache", "cache_size",
          "log",           "log_size", "mode",  "backend_id",
          "drain_on_stop", "tuning",   NULL };
  struct gw_volume *v = &c->cfg->volumes[i];

  if (!json_is_object (vo->v))
    return fail (c, vo, false, "must be an object");
  if (check_keys (c, vo, keys) == -1 || parse_name (c, vo, i, v) == -1
      || parse_backend (c, vo, i, v) == -1 || parse_cache (c, vo, i, v) == -1
      || parse_logs (c, vo, i, v) == -1 || parse_mode (c, vo, v) == -1
      || get_string (c, vo, "backend_id", false, &v->backend_id, NULL) == -1
      || get_bool (c, vo, "drain_on_stop", &v->drain_on_stop) == -1
      || parse_tuning (c, vo, v) == -1 || check_new_cache_id (c, vo, v) == -1)
    return -1;
  return 0;
}

/* "volumes": [ at least one ]. */
static int
parse_volumes (struct ctx *c, const struct at *root, struct gw_config *cfg)
{
  struct at a, e;
  size_t n;

  if (!member (c, root, "volumes", &a))
    return missing (c, root, "volumes");
  if (!json_is_array (a.v))
    return fail (c, &a, false, "must be an array");
  n = json_array_size (a.v);
  if (n == 0)
    return fail (c, &a, false, "must hold at least one volume");
  cfg->volumes = calloc (n, sizeof *cfg->volumes);
  if (cfg->volumes == NULL)
    return oom (c, &a);
  cfg->nvolumes = n;
  for (size_t i = 0; i < n; i++)
    {
      element (c, &a, i, &e);
      if (parse_volume (c, &e, i) == -1)
        return -1;
    }
  return 0;
}

static int
parse_root (struct ctx *c, json_t *root, struct gw_config *cfg)
{
  static const char *const keys[]
      = { "listen",  "tls",     "nbdkit",  "filter",  "plugin_dir",
          "run_dir", "metrics", "restart", "volumes", NULL };
  struct at r = { .v = root, .node = 0 };

  if (!json_is_object (root))
    return fail (c, &r, false, "the configuration must be a JSON object");
  if (check_keys (c, &r, keys) == -1 || parse_listen (c, &r, cfg) == -1
      || parse_tls (c, &r, cfg) == -1 || parse_programs (c, &r, cfg) == -1
      || parse_metrics (c, &r, cfg) == -1 || parse_restart (c, &r, cfg) == -1
      || parse_volumes (c, &r, cfg) == -1)
    return -1;
  return 0;
}

/* ------------------------------------------------------------------ */
/* Entry points. */

/* jansson refused the text: its message, or for a duplicate key ours
 * with the key's path and position.
 */
static int
syntax_error (struct ctx *c, const char *text, size_t len,
              const json_error_t *je)
{
  struct at a = { .node = NO_NODE };

  if (json_error_code (je) == json_error_duplicate_key
      && (a.node = scan_tree (&c->t, text, len, true)) != 0)
    {
      ptree_path (&c->t, a.node, a.path, sizeof a.path);
      return fail (c, &a, true, "duplicate key");
    }
  if (c->errlen == 0)
    return -1;
  if (je->line < 1)
    snprintf (c->err, c->errlen, "%s: %s", c->file, je->text);
  else
    snprintf (c->err, c->errlen, "%s:%d:%d: %s", c->file, je->line,
              je->column > 0 ? je->column : 1, je->text);
  return -1;
}

static int
parse_buffer (const char *file, const char *text, size_t len, bool check_paths,
              struct gw_config *cfg, char *err, size_t errlen)
{
  struct gw_config tmp = { 0 };
  struct ctx c = { .file = file,
                   .err = err,
                   .errlen = err ? errlen : 0,
                   .check_paths = check_paths,
                   .cfg = &tmp };
  json_error_t je;
  json_t *root;
  int r = -1;

  memset (cfg, 0, sizeof *cfg);
  if (c.errlen)
    err[0] = '\0';
  root = json_loadb (text, len, JSON_REJECT_DUPLICATES, &je);
  if (root == NULL)
    syntax_error (&c, text, len, &je);
  else
    {
      scan_tree (&c.t, text, len, false);
      tmp.file = strdup (file);
      if (tmp.file == NULL)
        oom (&c, &(struct at){ .node = NO_NODE });
      else
        r = parse_root (&c, root, &tmp);
      json_decref (root);
    }
  for (size_t i = 0; i < c.claims.len; i++)
    free (c.claims.ptr[i].canon);
  claims_reset (&c.claims);
  ptree_reset (&c.t);
  if (r == -1)
    gw_config_free (&tmp);
  else
    *cfg = tmp;
  return r;
}

int
gw_config_parse (const char *file, const char *text, bool check_paths,
                 struct gw_config *cfg, char *err, size_t errlen)
{
  return parse_buffer (file, text, strlen (text), check_paths, cfg, err,
                       errlen);
}

/* The whole of file into *text (*len bytes); errno on failure. */
static int
read_file (const char *file, char **text, size_t *len)
{
  int fd = open (file, O_RDONLY | O_CLOEXEC);
  size_t cap = 0;
  ssize_t n;
  char *p;

  *text = NULL;
  *len = 0;
  if (fd == -1)
    return errno;
  do
    {
      if (*len == cap)
        {
          cap = cap ? 2 * cap : 4096;
          p = cap > MAX_FILE ? NULL : realloc (*text, cap);
          if (p == NULL)
            {
              close (fd);
              return cap > MAX_FILE ? EFBIG : ENOMEM;
            }
          *text = p;
        }
      n = read (fd, *text + *len, cap - *len);
      if (n > 0)
        *len += n;
    }
  while (n > 0 || (n == -1 && errno == EINTR));
  n = n == -1 ? errno : 0;
  close (fd);
  return n;
}

int
gw_config_load (const char *file, bool check_paths, struct gw_config *cfg,
                char *err, size_t errlen)
{
  HHC_CLEANUP_FREE char *text = NULL;
  size_t len;
  int e = read_file (file, &text, &len);

  memset (cfg, 0, sizeof *cfg);
  if (e)
    {
      if (err && errlen)
        snprintf (err, errlen, "%s: %s", file, strerror (e));
      return -1;
    }
  return parse_buffer (file, text ? text : "", len, check_paths, cfg, err,
                       errlen);
}

static void
free_volume (struct gw_volume *v)
{
  char **strings[]
      = { &v->name,      &v->path,      &v->uri,        &v->endpoint,
          &v->bucket,    &v->prefix,    &v->region,     &v->credentials,
          &v->size,      &v->ca_file,   &v->url,        &v->chap_file,
          &v->initiator, &v->cache,     &v->cache_size, &v->log_size,
          &v->mode,      &v->backend_id };

  for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++)
    free (*strings[i]);
  for (unsigned i = 0; i < v->nlogs; i++)
    free (v->logs[i]);
  for (unsigned i = 0; i < v->ntuning; i++)
    {
      free (v->tuning[i].key);
      free (v->tuning[i].value);
    }
}

void
gw_config_free (struct gw_config *cfg)
{
  char **strings[] = { &cfg->file,          &cfg->listen_address,
                       &cfg->listen_socket, &cfg->tls_certificates,
                       &cfg->tls_psk_file,  &cfg->nbdkit,
                       &cfg->filter,        &cfg->plugin_dir,
                       &cfg->run_dir,       &cfg->metrics_address };

  for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++)
    free (*strings[i]);
  for (size_t i = 0; i < cfg->nvolumes; i++)
    free_volume (&cfg->volumes[i]);
  free (cfg->volumes);
  memset (cfg, 0, sizeof *cfg);
}

const struct gw_volume *
gw_config_find (const struct gw_config *cfg, const char *name)
{
  for (size_t i = 0; i < cfg->nvolumes; i++)
    if (cfg->volumes[i].name && strcmp (cfg->volumes[i].name, name) == 0)
      return &cfg->volumes[i];
  return NULL;
}

/* Both NULL, or equal strings. */
static bool
str_eq (const char *a, const char *b)
{
  return a == b || (a && b && strcmp (a, b) == 0);
}

bool
gw_volume_equal (const struct gw_volume *a, const struct gw_volume *b)
{
  const char *const sa[]
      = { a->name,     a->path,      a->uri,         a->endpoint, a->bucket,
          a->prefix,   a->region,    a->credentials, a->size,     a->ca_file,
          a->url,      a->chap_file, a->initiator,   a->cache,    a->cache_size,
          a->log_size, a->mode,      a->backend_id };
  const char *const sb[]
      = { b->name,     b->path,      b->uri,         b->endpoint, b->bucket,
          b->prefix,   b->region,    b->credentials, b->size,     b->ca_file,
          b->url,      b->chap_file, b->initiator,   b->cache,    b->cache_size,
          b->log_size, b->mode,      b->backend_id };

  if (a->type != b->type || a->tls_verify != b->tls_verify
      || a->drain_on_stop != b->drain_on_stop || a->nlogs != b->nlogs
      || a->ntuning != b->ntuning || a->sessions != b->sessions
      || a->timeout != b->timeout)
    return false;
  for (size_t i = 0; i < sizeof sa / sizeof sa[0]; i++)
    if (!str_eq (sa[i], sb[i]))
      return false;
  for (unsigned i = 0; i < a->nlogs; i++)
    if (!str_eq (a->logs[i], b->logs[i]))
      return false;
  for (unsigned i = 0; i < a->ntuning; i++)
    if (!str_eq (a->tuning[i].key, b->tuning[i].key)
        || !str_eq (a->tuning[i].value, b->tuning[i].value))
      return false;
  return true;
}

const char *
gw_backend_type_to_string (enum gw_backend_type t)
{
  switch (t)
    {
    case GW_BACKEND_FILE:
      return "file";
    case GW_BACKEND_NBD:
      return "nbd";
    case GW_BACKEND_COS:
      return "cos";
    case GW_BACKEND_ISCSI:
      return "iscsi";
    }
  return "unknown";
}
