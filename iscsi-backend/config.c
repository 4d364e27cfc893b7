/* iscsi-backend: the plugin's parameters (.config, .config_complete):
 * where and how to log in, as struct pool_conf (pool.h).  Whole
 * numbers are parsed with common/parse.h, as every number of the
 * filter and the other plugin.  Every refusal is one error line that
 * names the key.
 */
#include <config.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "config.h"
#include "parse.h"

#define DEFAULT_PORT "3260"

struct pool_conf conf = {
  .lun = -1,
  .sessions = 4,
  .attempts = 6,
};

static int
set_string (char **dst, const char *key, const char *value, size_t len)
{
  free (*dst);
  *dst = strndup (value, len);
  if (*dst == NULL)
    {
      nbdkit_error ("%s: strndup: %m", key);
      return -1;
    }
  return 0;
}

/* KEY=VALUE as a whole number from LO to HI (common/parse.h) into
 * *OUT, or one error line saying what it MUST be.
 */
static int
parse_number (const char *key, const char *value, unsigned lo, unsigned hi,
              const char *must, unsigned *out)
{
  unsigned v;

  if (hhc_parse_unsigned (value, NULL, &v) != NULL || v < lo || v > hi)
    {
      nbdkit_error ("%s: must be %s", key, must);
      return -1;
    }
  *out = v;
  return 0;
}

static int
parse_lun (const char *s)
{
  unsigned v;

  if (parse_number ("lun", s, 0, 16383, "a number from 0 to 16383", &v) == -1)
    return -1;
  conf.lun = v;
  return 0;
}

/* Split iscsi://[user[%password]@]host[:port]/target-iqn/lun.  The
 * URL may hold a secret, so no message repeats it.
 */
static int
parse_url (const char *url)
{
  const char *p, *at, *slash, *slash2, *pct;

  if (strncmp (url, "iscsi://", 8) != 0)
    {
      nbdkit_error ("url: must start with iscsi://");
      return -1;
    }
  p = url + 8;
  slash = strchr (p, '/');
  if (slash == NULL || (slash2 = strrchr (slash + 1, '/')) == NULL
      || slash2 == slash + 1 || slash2[1] == '\0')
    {
      nbdkit_error ("url: expected iscsi://[user[%%password]@]host[:port]"
                    "/target-iqn/lun");
      return -1;
    }
  at = memchr (p, '@', slash - p);
  if (at)
    {
      pct = memchr (p, '%', at - p);
      if (set_string (&conf.user, "url", p, (pct ? pct : at) - p) == -1)
        return -1;
      if (pct
          && set_string (&conf.password, "url", pct + 1, at - pct - 1) == -1)
        return -1;
      p = at + 1;
    }
  if (set_string (&conf.portal, "url", p, slash - p) == -1
      || set_string (&conf.target, "url", slash + 1, slash2 - slash - 1) == -1)
    return -1;
  return parse_lun (slash2 + 1);
}

int
config_set (const char *key, const char *value)
{
  if (strcmp (key, "url") == 0)
    return parse_url (value);
  else if (strcmp (key, "portal") == 0)
    return set_string (&conf.portal, key, value, strlen (value));
  else if (strcmp (key, "target") == 0)
    return set_string (&conf.target, key, value, strlen (value));
  else if (strcmp (key, "lun") == 0)
    return parse_lun (value);
  else if (strcmp (key, "initiator") == 0)
    return set_string (&conf.initiator, key, value, strlen (value));
  else if (strcmp (key, "user") == 0)
    return set_string (&conf.user, key, value, strlen (value));
  else if (strcmp (key, "password") == 0)
    {
      free (conf.password);
      conf.password = NULL;
      return nbdkit_read_password (value, &conf.password);
    }
  else if (strcmp (key, "sessions") == 0)
    return parse_number (key, value, 1, 64, "between 1 and 64", &conf.sessions);
  else if (strcmp (key, "timeout") == 0)
    {
      unsigned v;
      if (parse_number (key, value, 0, INT_MAX,
                        "0 (none) or a number of seconds", &v)
          == -1)
        return -1;
      conf.timeout = v;
      return 0;
    }
  nbdkit_error ("unknown parameter '%s'", key);
  return -1;
}

/* Append the default port to a portal given without one. */
static int
portal_add_port (void)
{
  const char *end = conf.portal;
  char *s;

  if (conf.portal[0] == '[')
    {
      end = strchr (conf.portal, ']');
      if (end == NULL)
        {
          nbdkit_error ("portal: unterminated [IPv6 address]");
          return -1;
        }
    }
  if (strchr (end, ':'))
    return 0;
  if (asprintf (&s, "%s:%s", conf.portal, DEFAULT_PORT) == -1)
    {
      nbdkit_error ("asprintf: %m");
      return -1;
    }
  free (conf.portal);
  conf.portal = s;
  return 0;
}

int
config_complete (void)
{
  if (conf.portal == NULL || conf.target == NULL || conf.lun < 0)
    {
      nbdkit_error ("give url=iscsi://HOST[:PORT]/TARGET-IQN/LUN, or portal=,"
                    " target= and lun=");
      return -1;
    }
  if (conf.password && conf.user == NULL)
    {
      nbdkit_error ("password= needs user= (CHAP)");
      return -1;
    }
  if (conf.initiator == NULL
      && set_string (&conf.initiator, "initiator", DEFAULT_INITIATOR,
                     strlen (DEFAULT_INITIATOR))
             == -1)
    return -1;
  return portal_add_port ();
}

void
config_free (void)
{
  if (conf.password)
    memset (conf.password, 0, strlen (conf.password));
  free (conf.portal);
  free (conf.target);
  free (conf.initiator);
  free (conf.user);
  free (conf.password);
}
