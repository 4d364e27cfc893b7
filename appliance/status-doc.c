/* The status document hhc-gateway serves (appliance/metrics.c's top
 * comment has its shape), and the memory streams its renderings are
 * written to: what metrics.c and status-html.c share.
 */
#include <config.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include <jansson.h>

#include "status-doc.h"

/* The document, or NULL if text is not a JSON object. */
json_t *
doc_parse (const char *text)
{
  json_t *doc;

  if (text == NULL)
    return NULL;
  doc = json_loads (text, JSON_REJECT_DUPLICATES, NULL);
  if (doc && !json_is_object (doc))
    {
      json_decref (doc);
      return NULL;
    }
  return doc;
}

int
doc_out_open (struct doc_out *o)
{
  o->buf = NULL;
  o->len = 0;
  o->f = open_memstream (&o->buf, &o->len);
  return o->f ? 0 : -1;
}

/* Close the stream: its text, or NULL (and nothing left) on error. */
char *
doc_out_close (struct doc_out *o)
{
  bool bad = ferror (o->f);

  if (fclose (o->f) != 0 || bad)
    {
      free (o->buf);
      return NULL;
    }
  return o->buf;
}

const char *
doc_str (const json_t *obj, const char *key)
{
  return json_string_value (json_object_get (obj, key));
}

/* obj[key] as a number (integer or real); false if it is not one. */
bool
doc_num (const json_t *obj, const char *key, double *v)
{
  const json_t *j = json_object_get (obj, key);

  if (!json_is_number (j))
    return false;
  *v = json_number_value (j);
  return true;
}
