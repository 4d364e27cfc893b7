/* cos-backend: extents from one bucket listing (ListObjectsV2) of the
 * objects of the request, at most 1000 keys; nbdkit accepts fewer
 * extents than asked for.  A missing object is a hole that reads as
 * zeros; a dirty one (write-back) is data even if it is not stored
 * yet.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "config.h"
#include "extents.h"
#include "object.h"
#include "s3.h"

#define MAX_KEYS 1000

/* One listing: objects FIRST..LAST, DIRTY[i - FIRST] for each. */
struct listing {
  struct nbdkit_extents *extents;
  uint64_t first, last;
  uint64_t next; /* first object not yet reported */
  bool dirty[MAX_KEYS];
};

/* Objects [FROM, TO) that the listing does not have: holes, except
 * those dirty, which are data.
 */
static int
add_gap (struct listing *l, uint64_t from, uint64_t to)
{
  while (from < to)
    {
      bool d = l->dirty[from - l->first];
      uint64_t end = from + 1;
      while (end < to && l->dirty[end - l->first] == d)
        end++;
      if (nbdkit_add_extent (l->extents, from * vol.object_size,
                             (end - from) * vol.object_size,
                             d ? 0 : NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO)
          == -1)
        return -1;
      from = end;
    }
  return 0;
}

/* The query that lists L's objects: the keys after object first - 1
 * under PREFIX/.  NULL after nbdkit_error.
 */
static char *
list_query (const struct listing *l)
{
  char key[1024], after[1024];
  char *eprefix = NULL, *eafter = NULL, *query = NULL;

  if (conf.prefix[0])
    {
      snprintf (key, sizeof key, "%s/", conf.prefix);
      eprefix = curl_easy_escape (NULL, key, 0);
    }
  if (l->first > 0)
    {
      object_key (l->first - 1, after, sizeof after);
      eafter = curl_easy_escape (NULL, after, 0);
    }
  if ((conf.prefix[0] && eprefix == NULL) || (l->first > 0 && eafter == NULL)
      || asprintf (&query, "list-type=2&max-keys=%" PRIu64 "%s%s%s%s",
                   l->last - l->first + 1, eprefix ? "&prefix=" : "",
                   eprefix ? eprefix : "", eafter ? "&start-after=" : "",
                   eafter ? eafter : "")
             == -1)
    {
      query = NULL;
      nbdkit_error ("cos: out of memory");
    }
  curl_free (eprefix);
  curl_free (eafter);
  return query;
}

/* Whether listed key GOT names an object, and which (*IDX): only
 * PREFIX/ followed by 16 hex digits does.
 */
static bool
key_object (const char *got, uint64_t *idx)
{
  size_t plen = conf.prefix[0] ? strlen (conf.prefix) + 1 : 0;
  char *end;

  if (strlen (got) != plen + 16
      || (plen
          && (strncmp (got, conf.prefix, plen - 1) != 0
              || got[plen - 1] != '/')))
    return false;
  *idx = strtoull (got + plen, &end, 16);
  return *end == '\0';
}

/* Report the objects that listing TEXT[0..LEN) has, and the gaps
 * before them.  Returns 0, -1 after nbdkit_add_extent failed, or -2
 * when the listing is malformed.
 */
static int
add_listed (struct listing *l, const char *text, size_t len)
{
  char got[1024];
  size_t pos = 0;
  uint64_t idx;
  int found;

  while ((found = s3_xml_next (text, len, &pos, "Key", got, sizeof got)) == 1)
    {
      if (!key_object (got, &idx) || idx < l->next)
        continue;
      if (idx > l->last)
        break;
      if (add_gap (l, l->next, idx) == -1
          || nbdkit_add_extent (l->extents, idx * vol.object_size,
                                vol.object_size, 0)
                 == -1)
        return -1;
      l->next = idx + 1;
    }
  return found == -1 ? -2 : 0;
}

/* What the listing did not cover.  A truncated listing (other keys
 * under the prefix used up max-keys) says nothing about the objects
 * after its last key: report only what it covered, or, if it covered
 * nothing, the first object as data (always a safe answer).
 */
static int
add_rest (struct listing *l, bool truncated)
{
  if (l->next > l->last)
    return 0;
  if (!truncated)
    return add_gap (l, l->next, l->last + 1);
  if (l->next == l->first)
    return nbdkit_add_extent (l->extents, l->first * vol.object_size,
                              vol.object_size, 0);
  return 0;
}

int
extents_list (uint32_t count, uint64_t offset, struct nbdkit_extents *extents)
{
  struct listing l = { .extents = extents,
                       .first = offset / vol.object_size,
                       .last = (offset + count - 1) / vol.object_size };
  char *query;
  char trunc[16] = "false";
  size_t tpos = 0;
  int r;

  if (l.last - l.first >= MAX_KEYS)
    l.last = l.first + MAX_KEYS - 1;
  l.next = l.first;
  /* Dirty objects may not be in the listing yet: they are data. */
  if (vol.wb)
    wbuf_dirty_set (vol.wb, l.first, l.last, l.dirty);
  query = list_query (&l);
  if (query == NULL)
    return -1;
  struct s3_io io = { .method = "GET", .key = NULL, .query = query };
  r = s3_do (vol.s3, &io);
  if (r == 0)
    r = add_listed (&l, io.text, io.text_len);
  if (r == -2
      || (r == 0
          && s3_xml_next (io.text, io.text_len, &tpos, "IsTruncated", trunc,
                          sizeof trunc)
                 == -1))
    {
      nbdkit_error ("cos: GET s3://%s?list-type=2: malformed listing",
                    conf.bucket);
      errno = EIO;
      r = -1;
    }
  else if (r == 0)
    r = add_rest (&l, strcmp (trunc, "true") == 0);
  free (io.text);
  free (query);
  return r;
}
