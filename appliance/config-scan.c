/* The position scanner of hhc-gateway.json: see config-scan.h.  It
 * runs on text jansson has accepted (or refused for a duplicate key
 * only), so it follows the JSON grammar loosely and never fails on
 * what jansson accepts; nesting deeper than MAX_DEPTH stops it.
 */
#include <config.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config-scan.h"

#define MAX_DEPTH 4096 /* nesting the scanner follows */

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
size_t
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
size_t
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
void
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
